# Elementwise, reduction, matmul (and the linear with bias), fill/copy and random kernels.
list(APPEND SUBLET_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/elementwise.cpp
  ${CMAKE_CURRENT_LIST_DIR}/reduce.cpp
  ${CMAKE_CURRENT_LIST_DIR}/matmul.cpp
  ${CMAKE_CURRENT_LIST_DIR}/linear_bias.cpp
  ${CMAKE_CURRENT_LIST_DIR}/linear_gelu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/copy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/random.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/elementwise_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/reduce_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/matmul_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/linear_bias_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/copy_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/random_cpu.cpp
)
