# CUDA kernels beside the CPU ones (ops/cuda/): compiled only when CUDA is found. (nvcc's C++20
# dialect flag is taught to CMake at the top level, CMakeLists.txt, for every .cu in the tree.)
# --expt-relaxed-constexpr lets device code call the constexpr mask function of ops/dropout.h, so
# both devices share one definition of the dropout mask.
set(SUBLET_CUDA_KERNEL_FILES
  ${CMAKE_CURRENT_LIST_DIR}/cuda/elementwise.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/copy.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/index_check.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/reduce.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/reduce_columns.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/batch_norm_eval_backward.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/batch_norm_relu.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/batch_norm_split.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/pooling.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/max_pool_channels_last.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/loss.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/dropout.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/conv2d_bias.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/conv2d_im2col.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/conv2d_channel_pad.cu
)
set_source_files_properties(${SUBLET_CUDA_KERNEL_FILES} PROPERTIES COMPILE_OPTIONS "--expt-relaxed-constexpr")
list(APPEND SUBLET_OPS_CUDA_SOURCES
  ${SUBLET_CUDA_KERNEL_FILES}
  ${CMAKE_CURRENT_LIST_DIR}/cuda/cuda_checks.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/handles.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/lazy_library.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/cublas_loader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/cublaslt_loader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/matmul_cuda.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/cublaslt_gemm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/linear_bias_cuda.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/linear_gelu_cuda.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/random_cuda.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/conv2d_cuda.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/cudnn_backend.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/conv2d_graph.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/conv_bn_graph.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/conv2d_single_tap.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/conv_gemm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/batch_norm_cuda.cpp
)
