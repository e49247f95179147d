# Fused (multi-tensor) optimizer updates, the stream-capture query and the index checks a capture
# carries into its replays, work on a second stream (concurrent.cpp) and the profiler range.
list(APPEND SUBLET_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/optim_update.cpp
  # the global norm and clip scale of gradient clipping (multi-tensor, as the updates)
  ${CMAKE_CURRENT_LIST_DIR}/multi_tensor_norm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/stream_capture.cpp
  ${CMAKE_CURRENT_LIST_DIR}/captured_index_checks.cpp
  ${CMAKE_CURRENT_LIST_DIR}/concurrent.cpp
  ${CMAKE_CURRENT_LIST_DIR}/profiler_range.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/optim_update_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/multi_tensor_norm_cpu.cpp
)
list(APPEND SUBLET_OPS_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda/optim_update.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda/multi_tensor_norm.cu)
