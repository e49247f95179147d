# tests of NN kernels
foreach(nn_test test_conv2d test_conv2d_winograd test_conv2d_stride2 test_batch_norm test_pooling test_loss test_dropout)
  sublet_add_test(${nn_test} LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/${nn_test}.cpp LIBS sublet::ops)
endforeach()
# The fused batch norm + ReLU CPU kernels at uneven splits over explicit OpenMP thread counts.
find_package(OpenMP REQUIRED)
sublet_add_test(test_batch_norm_relu_cpu LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_batch_norm_relu_cpu.cpp
                LIBS sublet::ops OpenMP::OpenMP_CXX)
