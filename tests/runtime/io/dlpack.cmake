# DLPack exchange (runtime/io/dlpack.h): the sublet side on the CPU and on CUDA, and the
# real-client check against PyTorch (test_dlpack_torch).
sublet_add_test(test_dlpack LABEL cpu SOURCES io/test_dlpack.cpp LIBS sublet::runtime)
sublet_add_test(test_dlpack_cuda LABEL gpu SOURCES io/test_dlpack_cuda.cpp LIBS sublet::runtime)

# test_dlpack_torch loads a plugin built against a python3's PyTorch by
# `scripts/build_torch_plugin.sh --dlpack` (SUBLET_TORCH_DLPACK_PLUGIN at run time overrides the
# path, e.g. on the GPU machine). Here CMake builds it when a python3 that imports torch is found
# (SUBLET_TORCH_PYTHON, else python3 on PATH, else /usr/bin/python3: Debian's python3-torch is
# not visible to a pyenv or venv python3); otherwise the test skips and says why.
set(SUBLET_TORCH_PYTHON "" CACHE FILEPATH "python3 whose PyTorch test_dlpack_torch builds its plugin against")
set(dlpack_torch_skip "")
set(dlpack_torch_python "")
if(SUBLET_SANITIZE)
  set(dlpack_torch_skip "sanitizer build (SUBLET_SANITIZE=${SUBLET_SANITIZE}): libtorch is not instrumented")
else()
  if(SUBLET_TORCH_PYTHON)
    set(candidates "${SUBLET_TORCH_PYTHON}")
  else()
    find_program(path_python3 python3 NO_CACHE)
    set(candidates ${path_python3} /usr/bin/python3)
    list(REMOVE_DUPLICATES candidates)
  endif()
  set(tried "")
  foreach(py IN LISTS candidates)
    if(NOT EXISTS "${py}")
      list(APPEND tried "${py} (not there)")
      continue()
    endif()
    execute_process(COMMAND "${py}" -c "import torch; print(torch.__version__)" OUTPUT_VARIABLE torch_version
                    RESULT_VARIABLE torch_status OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET TIMEOUT 120)
    if(torch_status EQUAL 0)
      set(dlpack_torch_python "${py}")
      break()
    endif()
    list(APPEND tried "${py} (no torch)")
  endforeach()
  if(NOT dlpack_torch_python)
    string(REPLACE ";" ", " tried "${tried}")
    set(dlpack_torch_skip "no python3 with torch at configure time (tried: ${tried}); install python3-torch and reconfigure, or set SUBLET_TORCH_DLPACK_PLUGIN to a plugin built by scripts/build_torch_plugin.sh --dlpack")
  endif()
endif()

sublet_add_test(test_dlpack_torch LABEL cpu SOURCES io/test_dlpack_torch.cpp LIBS sublet::runtime ${CMAKE_DL_LIBS})
if(dlpack_torch_python)
  set(dlpack_plugin "${CMAKE_BINARY_DIR}/libsublet_torch_dlpack.so")
  add_custom_command(OUTPUT "${dlpack_plugin}"
    COMMAND ${CMAKE_COMMAND} -E env "PYTHON=${dlpack_torch_python}"
            "${PROJECT_SOURCE_DIR}/scripts/build_torch_plugin.sh" --dlpack "${dlpack_plugin}"
    DEPENDS "${PROJECT_SOURCE_DIR}/tests/runtime/io/torch_dlpack_plugin.cpp" "${PROJECT_SOURCE_DIR}/scripts/build_torch_plugin.sh"
    COMMENT "test_dlpack_torch: DLPack plugin against PyTorch ${torch_version} (${dlpack_torch_python})" VERBATIM)
  add_custom_target(sublet_torch_dlpack DEPENDS "${dlpack_plugin}")
  add_dependencies(test_dlpack_torch sublet_torch_dlpack)
  set(dlpack_torch_config "#define SUBLET_TORCH_DLPACK_PLUGIN_PATH \"${dlpack_plugin}\"\n")
  message(STATUS "sublet: test_dlpack_torch against PyTorch ${torch_version} (${dlpack_torch_python})")
else()
  set(dlpack_torch_config "#define SUBLET_TORCH_DLPACK_SKIP \"${dlpack_torch_skip}\"\n")
  message(STATUS "sublet: test_dlpack_torch skips: ${dlpack_torch_skip}")
endif()
# A generated header, not -D: the skip reason's parentheses and quotes survive no shell quoting.
file(CONFIGURE OUTPUT "${CMAKE_CURRENT_BINARY_DIR}/io/dlpack_torch_config.h" CONTENT "${dlpack_torch_config}")
target_include_directories(test_dlpack_torch PRIVATE "${CMAKE_CURRENT_BINARY_DIR}/io")
