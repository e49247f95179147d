include(${CMAKE_CURRENT_LIST_DIR}/nn/tests.cmake)
