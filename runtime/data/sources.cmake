# Dataset readers, loader and checkpoint (safetensors) sources.
list(APPEND SUBLET_RUNTIME_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/batch_buffer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cifar10.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dataset.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gpt2_bpe.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gpt2_pretokenize.cpp
  ${CMAKE_CURRENT_LIST_DIR}/loader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/mnist.cpp
  ${CMAKE_CURRENT_LIST_DIR}/regular_file.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sample_transform.cpp
  ${CMAKE_CURRENT_LIST_DIR}/synthetic.cpp
  ${CMAKE_CURRENT_LIST_DIR}/text_corpus.cpp
  ${CMAKE_CURRENT_LIST_DIR}/token_dataset.cpp
  ${CMAKE_CURRENT_LIST_DIR}/token_file.cpp
  ${CMAKE_CURRENT_LIST_DIR}/unicode_classes.cpp
)
include(${CMAKE_CURRENT_LIST_DIR}/../io/sources.cmake)

# The readers gunzip MNIST files with zlib. The runtime target does not exist yet while this
# list is included, so the link is deferred to the end of runtime/CMakeLists.txt.
find_package(ZLIB REQUIRED)
cmake_language(DEFER CALL target_link_libraries runtime PRIVATE ZLIB::ZLIB)
