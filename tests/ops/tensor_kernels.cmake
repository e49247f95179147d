# tests of tensor kernels
sublet_add_test(test_tensor_kernels_cpu LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tensor_kernels_cpu.cpp LIBS ops)
