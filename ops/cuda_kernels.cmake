# CUDA kernels beside the CPU ones (ops/cuda/): compiled only when CUDA is found.
# The .cu files include ops/ headers written in C++20, and CMake derives the CUDA dialect from
# CMAKE_CXX_STANDARD (20). CMake 3.25 does not know nvcc's C++20 flag, so it is taught here
# (this directory only). --expt-relaxed-constexpr lets device code call the constexpr mask
# function of ops/dropout.h, so both devices share one definition of the dropout mask.
if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION OR CMAKE_CUDA20_STANDARD_COMPILE_OPTION STREQUAL "")
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
set(CMAKE_CUDA_STANDARD 20)
set(SUBLET_CUDA_KERNEL_FILES
  ${CMAKE_CURRENT_LIST_DIR}/cuda/elementwise.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/copy.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/index_check.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/reduce.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/batch_norm_eval_backward.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/batch_norm_relu.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/batch_norm_split.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/pooling.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/loss.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/dropout.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/conv2d_bias.cu
)
set_source_files_properties(${SUBLET_CUDA_KERNEL_FILES} PROPERTIES COMPILE_OPTIONS "--expt-relaxed-constexpr")
list(APPEND SUBLET_OPS_CUDA_SOURCES
  ${SUBLET_CUDA_KERNEL_FILES}
  ${CMAKE_CURRENT_LIST_DIR}/cuda/cuda_checks.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/handles.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/cublas_loader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/matmul_cuda.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/random_cuda.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/conv2d_cuda.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/conv2d_graph.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/batch_norm_cuda.cpp
)
