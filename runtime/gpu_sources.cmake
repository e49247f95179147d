# CUDA-only runtime pieces: graph capture of training steps, pinned host staging for batches.
if(SUBLET_HAVE_CUDA)
  list(APPEND SUBLET_RUNTIME_SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/cuda_graph.cpp
    ${CMAKE_CURRENT_LIST_DIR}/graphed_train_step.cpp
    ${CMAKE_CURRENT_LIST_DIR}/pinned_buffer.cpp
  )
endif()
