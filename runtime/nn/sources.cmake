# Differentiable NN functions (runtime/nn/functional.h). Included from runtime/CMakeLists.txt.
list(APPEND SUBLET_RUNTIME_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/functional_conv.cpp
  ${CMAKE_CURRENT_LIST_DIR}/functional_batch_norm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/functional_pooling.cpp
  ${CMAKE_CURRENT_LIST_DIR}/functional_loss.cpp
  ${CMAKE_CURRENT_LIST_DIR}/functional_dropout.cpp
  ${CMAKE_CURRENT_LIST_DIR}/functional_attention.cpp
  ${CMAKE_CURRENT_LIST_DIR}/functional_softmax.cpp
  ${CMAKE_CURRENT_LIST_DIR}/functional_embedding.cpp
  ${CMAKE_CURRENT_LIST_DIR}/functional_layer_norm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/functional_activation.cpp
  ${CMAKE_CURRENT_LIST_DIR}/functional_linear.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sync_batch_norm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/parameter_format.cpp
)
include(${CMAKE_CURRENT_LIST_DIR}/layers.cmake)  # nn layers (Conv2d, BatchNorm2d, ...)
