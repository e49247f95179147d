# Scaled dot-product attention (ops/attention.h): the CPU reference, and on CUDA the cuBLAS
# path (float32, float64), cuDNN's fused flash attention and sublet's fused flash-style kernels
# (bfloat16, float16).
list(APPEND SUBLET_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/attention.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/attention_cpu.cpp
)
list(APPEND SUBLET_OPS_CUDA_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/cuda/attention_cuda.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/attention_cudnn.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/attention_cudnn_graph.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/attention_flash_launch.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/attention_unfused.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/attention_flash_forward.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/attention_flash_backward.cu
)
