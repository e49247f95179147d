# File I/O for the runtime: whole-file (gzip-aware) reads, safetensors checkpoints, DLPack exchange.
# Included from data/sources.cmake for now; it can move to runtime/CMakeLists.txt unchanged.
list(APPEND SUBLET_RUNTIME_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/file_bytes.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dlpack.cpp
  ${CMAKE_CURRENT_LIST_DIR}/safetensors.cpp
)
