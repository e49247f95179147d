# Convolution, normalisation, pooling, loss and dropout kernels.
list(APPEND SUBLET_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/conv2d.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conv_settings.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/conv2d_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/conv2d_avx2_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/conv2d_avx512_tiles.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/conv2d_winograd_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/conv2d_winograd_weight_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/conv2d_stride2_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/gemm_avx512_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/batch_norm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/batch_norm_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/batch_norm_relu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/batch_norm_relu_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pooling.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/pooling_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/loss.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/loss_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dropout.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/dropout_cpu.cpp
)
# The one AVX-512 file of a build whose -march may stop at AVX2: its Eigen is renamed (see the
# file) and it runs only where the CPU has AVX-512 (cpu_has_avx512()).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64" AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/cpu/gemm_avx512_cpu.cpp PROPERTIES
    COMPILE_OPTIONS "-mavx512f;-mavx512vl;-mavx512dq;-mavx512bw;-mfma")
endif()
