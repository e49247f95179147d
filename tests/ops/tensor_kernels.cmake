# tests of tensor kernels
sublet_add_test(test_tensor_kernels_cpu LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tensor_kernels_cpu.cpp LIBS sublet::ops)
# the host-side pieces of the CUDA kernels (no GPU needed): dense-path choice, fast division
sublet_add_test(test_elementwise_plan LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_elementwise_plan.cpp LIBS sublet::ops)
sublet_add_test(test_reduce_plan LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_reduce_plan.cpp LIBS sublet::ops)
sublet_add_test(test_int_divider LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_int_divider.cpp LIBS sublet::ops)
# The index checks a CUDA graph carries into its replays: their host side.
sublet_add_test(test_captured_index_checks LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_captured_index_checks.cpp LIBS sublet::ops)
# Shape's container against std::vector
sublet_add_test(test_shape_vector LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_shape_vector.cpp LIBS sublet::ops)
# The judge of the 16-bit GPU kernel tests (tests/ops/half_test_support.h), on the CPU.
sublet_add_test(test_half_compare LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_half_compare.cpp LIBS sublet::ops)
# The CPU's 16-bit kernels (float32 kernels between widening and rounding) against float32.
sublet_add_test(test_half_adapters_cpu LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_half_adapters_cpu.cpp LIBS sublet::ops)
