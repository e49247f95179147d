# nn layers over runtime/nn/functional (Conv2d, BatchNorm2d, ReLU, pooling, Flatten, Dropout).
# Included from runtime/nn/sources.cmake.
list(APPEND SUBLET_RUNTIME_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/conv2d.cpp
  ${CMAKE_CURRENT_LIST_DIR}/batch_norm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pooling.cpp
  ${CMAKE_CURRENT_LIST_DIR}/activation.cpp
  ${CMAKE_CURRENT_LIST_DIR}/embedding.cpp
  ${CMAKE_CURRENT_LIST_DIR}/layer_norm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/clip_grad.cpp
  ${CMAKE_CURRENT_LIST_DIR}/flatten.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dropout.cpp
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint.cpp
  ${CMAKE_CURRENT_LIST_DIR}/module_ranges.cpp
)
