# Convolution, normalisation, pooling, loss and dropout kernels.
list(APPEND SUBLET_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/conv2d.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conv_settings.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/conv2d_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/conv2d_avx2_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/batch_norm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/batch_norm_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/batch_norm_relu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pooling.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/pooling_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/loss.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/loss_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dropout.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/dropout_cpu.cpp
)
