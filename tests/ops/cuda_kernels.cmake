# GPU tests of the CUDA kernels: each compares an op on the GPU with its CPU kernel on random
# data. Built only with CUDA; each test skips (ctest: skipped, not passed) without a device.
if(SUBLET_HAVE_CUDA)
  foreach(cuda_test test_cuda_elementwise test_cuda_reduce test_cuda_matmul test_cuda_copy test_cuda_random
          test_cuda_conv2d test_cuda_batch_norm test_cuda_batch_norm_relu test_cuda_pooling test_cuda_loss test_cuda_dropout
          test_cuda_streams test_cuda_memory_accounting test_cuda_half_copy
          test_cuda_half_elementwise test_cuda_half_reduce test_cuda_column_sum
          test_cuda_half_batch_norm test_cuda_channels_last_batch_norm test_cuda_half_pooling
          test_cuda_batch_norm_relu_mask)
    sublet_add_test(${cuda_test} LABEL gpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/${cuda_test}.cpp LIBS sublet::ops)
  endforeach()
  # The fused cross-entropy in every floating dtype against the float64 CPU kernel.
  sublet_add_test(test_cuda_cross_entropy LABEL gpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_cross_entropy.cpp
                  LIBS sublet::ops)
  # 16-bit matmul/conv2d and channels-last conv2d against the float32 CPU kernels.
  foreach(cuda_test test_cuda_half_matmul test_cuda_half_conv2d test_cuda_conv2d_channels_last test_cuda_conv2d_im2col
          test_cuda_batch_norm_count test_cuda_conv2d_channel_pad)
    sublet_add_test(${cuda_test} LABEL gpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/${cuda_test}.cpp LIBS sublet::ops)
  endforeach()
  # Their descriptors' strides and types (ops/cuda/conv2d_layout.h), checked on the CPU.
  sublet_add_test(test_conv2d_layout LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_conv2d_layout.cpp LIBS sublet::ops)
  # cuDNN's fused attention graphs (ops/cuda/attention_cudnn_graph.h): their op descriptors,
  # which cuDNN finalizes without a device, built on the CPU.
  sublet_add_test(test_attention_cudnn_graph LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_attention_cudnn_graph.cpp
                  LIBS sublet::ops)
  # The libraries opened on first use (ops/cuda/lazy_library.h), cuBLAS and cuBLASLt without a device.
  sublet_add_test(test_lazy_library LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_lazy_library.cpp LIBS sublet::ops)
  # Which shapes run as cuBLAS GEMMs (ops/cuda/conv2d_single_tap.h), checked on the CPU.
  sublet_add_test(test_conv2d_single_tap_shapes LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_conv2d_single_tap_shapes.cpp
                  LIBS sublet::ops)
  # Which shapes run as im2col + GEMM (ops/cuda/conv2d_im2col.h), checked on the CPU.
  sublet_add_test(test_conv2d_im2col_shapes LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_conv2d_im2col_shapes.cpp
                  LIBS sublet::ops)
  # Which shapes run on channel-padded operands (ops/cuda/conv2d_channel_pad.h), checked on the CPU.
  sublet_add_test(test_conv2d_channel_pad_shapes LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_conv2d_channel_pad_shapes.cpp
                  LIBS sublet::ops)
  # The 16-bit conversions of the GPU kernels (ops/cuda/half_types.cuh) compiled for the host and
  # checked against core/half.h on the CPU (CUDA's intrinsics emulate their rounding on the host).
  sublet_add_test(test_half_types_host LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_half_types_host.cpp LIBS sublet::ops)
  target_include_directories(test_half_types_host PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  # The channels-last max-pooling work items (ops/cuda/max_pool_channels_last.cuh) run on the CPU
  # against the CPU kernel, bit for bit.
  sublet_add_test(test_max_pool_vectorized_host LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_max_pool_vectorized_host.cpp
                  LIBS sublet::ops)
  target_include_directories(test_max_pool_vectorized_host PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  # The batch-norm passes' 16-bit pair stores and bit-level sign test, run in a probe kernel
  # (a library of its own: the test's .cpp keeps the shared precompiled header).
  add_library(test_vector_pack_probe STATIC ${CMAKE_CURRENT_LIST_DIR}/vector_pack_probe.cu)
  target_link_libraries(test_vector_pack_probe PUBLIC sublet::ops)
  sublet_add_test(test_cuda_vector_pack LABEL gpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_vector_pack.cpp
                  LIBS test_vector_pack_probe)
endif()
