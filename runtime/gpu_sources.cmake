# CUDA-only runtime pieces. runtime/cuda/ holds the parts that call the CUDA runtime themselves
# (graph capture, pinned staging of batches); graphed_train_step only builds on CudaGraph.
if(SUBLET_HAVE_CUDA)
  list(APPEND SUBLET_RUNTIME_SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/cuda/cuda_graph.cpp
    ${CMAKE_CURRENT_LIST_DIR}/cuda/pinned_buffer.cpp
    ${CMAKE_CURRENT_LIST_DIR}/graphed_train_step.cpp
  )
endif()
