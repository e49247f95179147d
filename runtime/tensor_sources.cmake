# Tensor, autograd, nn, optim sources.
list(APPEND SUBLET_RUNTIME_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/allocation_scope.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conversions.cpp
  ${CMAKE_CURRENT_LIST_DIR}/elementwise.cpp
  ${CMAKE_CURRENT_LIST_DIR}/factories.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gradcheck.cpp
  ${CMAKE_CURRENT_LIST_DIR}/init.cpp
  ${CMAKE_CURRENT_LIST_DIR}/matmul.cpp
  ${CMAKE_CURRENT_LIST_DIR}/memory_format.cpp
  ${CMAKE_CURRENT_LIST_DIR}/reductions.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shape.cpp
  ${CMAKE_CURRENT_LIST_DIR}/storage.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tensor.cpp
  ${CMAKE_CURRENT_LIST_DIR}/views.cpp
  ${CMAKE_CURRENT_LIST_DIR}/autograd/engine.cpp
  ${CMAKE_CURRENT_LIST_DIR}/autograd/function.cpp
  ${CMAKE_CURRENT_LIST_DIR}/autograd/grad_mode.cpp
  ${CMAKE_CURRENT_LIST_DIR}/autograd/node.cpp
  ${CMAKE_CURRENT_LIST_DIR}/nn/module.cpp
  ${CMAKE_CURRENT_LIST_DIR}/nn/linear.cpp
  ${CMAKE_CURRENT_LIST_DIR}/optim/optimizer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/optim/sgd.cpp
  ${CMAKE_CURRENT_LIST_DIR}/optim/adam.cpp
  ${CMAKE_CURRENT_LIST_DIR}/optim/fused_params.cpp
  ${CMAKE_CURRENT_LIST_DIR}/optim/lr_scheduler.cpp
  ${CMAKE_CURRENT_LIST_DIR}/amp/grad_scaler.cpp
)
