# The transformer ops: embedding, layer norm, GELU and softmax (log_softmax and the cross-entropy
# live with the losses, nn_kernels.cmake). Included from ops/CMakeLists.txt.
list(APPEND SUBLET_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/embedding.cpp
  ${CMAKE_CURRENT_LIST_DIR}/layer_norm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gelu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/softmax.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/embedding_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/layer_norm_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/gelu_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/softmax_cpu.cpp
)
# Their CUDA kernels (compiled only when CUDA is found), with the row softmax and the fused
# cross-entropy. gelu.cu and the CPU kernel share ops/gelu_math.h.
list(APPEND SUBLET_OPS_CUDA_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/cuda/embedding.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/layer_norm.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/gelu.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/softmax.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/cross_entropy.cu
)
