# Tests of runtime/nn (included from tests/runtime/CMakeLists.txt).
sublet_add_test(test_functional LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_functional.cpp LIBS runtime)
sublet_add_test(test_nn_checkpoint LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_checkpoint.cpp LIBS runtime)
sublet_add_test(test_sync_batch_norm LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sync_batch_norm.cpp LIBS runtime)
sublet_add_test(test_module_ranges LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_module_ranges.cpp LIBS runtime models)
sublet_add_test(test_batch_norm_dtypes LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_batch_norm_dtypes.cpp LIBS runtime)
if(SUBLET_HAVE_CUDA)
  sublet_add_test(test_batch_norm_half_cuda LABEL gpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_batch_norm_half_cuda.cpp LIBS runtime)
endif()
# Scaled dot-product attention: the CPU reference and autograd; on the GPU, the cuBLAS and fused paths.
sublet_add_test(test_attention LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_attention.cpp LIBS runtime)
if(SUBLET_HAVE_CUDA)
  sublet_add_test(test_attention_cuda LABEL gpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_attention_cuda.cpp LIBS runtime)
endif()
# The transformer ops (embedding, layer norm, GELU, softmax, the sequence cross-entropy, gradient clipping).
foreach(unit embedding layer_norm gelu softmax cross_entropy clip_grad)
  sublet_add_test(test_${unit} LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_${unit}.cpp LIBS runtime)
endforeach()
