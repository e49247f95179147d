# One line per optional dependency at the end of configure: what was found (version, where) or
# what is missing, what that turns off and the package or flag that provides it. Included last
# by the top CMakeLists.txt, so every find_package before it has run. It reads and reports only:
# nothing here changes what is built.

# "  NAME          text": names padded so the texts line up. The text may come in several quoted
# pieces (joined as they are, so none may hold a semicolon).
function(sublet_report name)
  string(CONCAT text ${ARGN})
  string(LENGTH "${name}" length)
  math(EXPR pad "14 - ${length}")
  string(REPEAT " " ${pad} spaces)
  message(STATUS "  ${name}${spaces}${text}")
endfunction()

# The NAME_MAJOR/MINOR/PATCH (or PATCHLEVEL) defines of a header as "M.m.p" into `out`.
function(sublet_header_version header prefix patch_name out)
  file(STRINGS "${header}" lines REGEX "#define ${prefix}_(MAJOR|MINOR|${patch_name}) +[0-9]+")
  set(parts "")
  foreach(part MAJOR MINOR ${patch_name})
    string(REGEX MATCH "${prefix}_${part} +([0-9]+)" match "${lines}")
    if(match)
      list(APPEND parts ${CMAKE_MATCH_1})
    endif()
  endforeach()
  list(JOIN parts "." version)
  if(version STREQUAL "")
    set(version "of unknown version")
  endif()
  set(${out} "${version}" PARENT_SCOPE)
endfunction()

message(STATUS "sublet: dependencies")

# --- CUDA toolkit, cuDNN, cuBLAS, NCCL: the CUDA backend -----------------------------------
set(sublet_cuda_packages "cuda-toolkit-13-0 from NVIDIA's CUDA repository (or Debian non-free's nvidia-cuda-toolkit)")
if(SUBLET_HAVE_CUDA)
  string(REPLACE ";" " " sublet_architectures "${CMAKE_CUDA_ARCHITECTURES}")
  sublet_report("CUDA toolkit" "${CUDAToolkit_VERSION} in ${CUDAToolkit_TARGET_DIR} (nvcc ${CMAKE_CUDA_COMPILER}), architectures ${sublet_architectures}")
elseif(NOT SUBLET_WITH_CUDA)
  sublet_report("CUDA toolkit" "off (-DSUBLET_WITH_CUDA=OFF): a CPU-only build, --device cuda refuses, GPU tests skip")
else()
  sublet_report("CUDA toolkit" "not found (no nvcc on PATH): a CPU-only build, --device cuda refuses, GPU tests skip. "
                "Install ${sublet_cuda_packages} and put its bin/ on PATH, or pass -DCMAKE_CUDA_COMPILER=/path/to/nvcc")
endif()

if(SUBLET_HAVE_CUDA)
  # FindCUDNN ran REQUIRED: found, or configure already stopped with its own message.
  sublet_report("cuDNN" "${CUDNN_VERSION} (cudnn_version.h in ${CUDNN_INCLUDE_DIR}, ${CUDNN_LIBRARY})")
else()
  sublet_report("cuDNN" "not needed (no CUDA backend)")
endif()

if(SUBLET_HAVE_CUDA)
  # Opened at run time by ops/cuda/cublas_loader.cpp, never linked: found or not, the build goes on.
  find_library(SUBLET_CUBLAS_LIBRARY cublas HINTS ${CUDAToolkit_LIBRARY_DIR} NO_CACHE)
  if(SUBLET_CUBLAS_LIBRARY)
    sublet_report("cuBLAS" "${SUBLET_CUBLAS_LIBRARY} (opened at run time, on the first GPU matmul)")
  else()
    sublet_report("cuBLAS" "libcublas.so not in ${CUDAToolkit_LIBRARY_DIR}: the build goes on, but GPU matmul, linear "
                  "and attention fail at run time until the loader finds it. Install the toolkit's cuBLAS (libcublas-13-0 "
                  "from NVIDIA's CUDA repository) or add its folder to LD_LIBRARY_PATH")
  endif()
else()
  sublet_report("cuBLAS" "not needed (no CUDA backend)")
endif()

if(SUBLET_HAVE_CUDA)
  # runtime/distributed/nccl_library.cpp compiles against nccl.h (libnccl.so.2 itself is opened at
  # run time, SUBLET_NCCL_LIBRARY). Searched where the compiler will look for it.
  set(sublet_include_path_env "$ENV{CPATH}:$ENV{CPLUS_INCLUDE_PATH}")
  string(REPLACE ":" ";" sublet_include_path_env "${sublet_include_path_env}")
  find_path(SUBLET_NCCL_INCLUDE_DIR nccl.h
            HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDNN_INCLUDE_DIR} ${sublet_include_path_env}
                  ${CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES}
            NO_CACHE)
  if(SUBLET_NCCL_INCLUDE_DIR)
    sublet_header_version("${SUBLET_NCCL_INCLUDE_DIR}/nccl.h" NCCL PATCH nccl_version)
    sublet_report("NCCL" "nccl.h ${nccl_version} in ${SUBLET_NCCL_INCLUDE_DIR} (--backend nccl, libnccl.so.2 itself is "
                  "opened at run time, or SUBLET_NCCL_LIBRARY)")
  else()
    string(REPLACE ";" ", " sublet_cuda_includes "${CUDAToolkit_INCLUDE_DIRS}")
    sublet_report("NCCL" "nccl.h NOT FOUND (searched ${sublet_cuda_includes} and the compiler's include path)")
    message(WARNING "sublet: the CUDA build compiles the NCCL process group (--backend nccl, data parallel on GPUs) "
            "against nccl.h, which is not on the compiler's include path: the build will stop at "
            "runtime/distributed/nccl_library.cpp. Install libnccl-dev (from NVIDIA's CUDA repository, or Debian non-free's), "
            "or add its include folder with CPATH or -DCMAKE_CXX_FLAGS=-I/path/to/include, or configure with "
            "-DSUBLET_WITH_CUDA=OFF for a CPU-only build")
  endif()
else()
  sublet_report("NCCL" "not needed (no CUDA backend): data parallel on the CPU uses Gloo")
endif()

# --- Gloo: --backend gloo (data parallel on the CPU) --------------------------------------------
if(TARGET sublet_gloo)
  find_package(Gloo CONFIG QUIET)  # found before, in runtime/distributed/: its version and folder
  sublet_report("Gloo" "${GLOO_VERSION} (${Gloo_DIR}): libsublet_gloo.so built, --backend gloo")
else()
  sublet_report("Gloo" "not found: --backend gloo (data parallel on the CPU) needs a libsublet_gloo.so from another "
                "build (SUBLET_GLOO_LIBRARY). Install Debian's libgloo-dev (scripts/setup.sh does)")
endif()

# --- torch: the parity tests' other side (a python3 that imports torch) -----------------------
# Looked up without importing torch (seconds): the tests that need it check again themselves.
set(sublet_torch_line "")
if(SUBLET_BUILD_TESTS)
  find_program(sublet_report_python3 python3 NO_CACHE)
  set(sublet_pythons ${SUBLET_TORCH_PYTHON} ${sublet_report_python3} /usr/bin/python3)
  list(REMOVE_DUPLICATES sublet_pythons)
  foreach(py IN LISTS sublet_pythons)
    if(sublet_torch_line OR NOT EXISTS "${py}")
      continue()
    endif()
    execute_process(
      COMMAND "${py}" -c "import importlib.metadata as m, importlib.util as u; s = u.find_spec('torch'); print(m.version('torch') if s else '', end='')"
      OUTPUT_VARIABLE torch_version RESULT_VARIABLE status ERROR_QUIET TIMEOUT 60)
    if(status EQUAL 0 AND NOT torch_version STREQUAL "")
      set(sublet_torch_line "${torch_version} for ${py} (the PyTorch parity tests: GPT, DLPack)")
    endif()
  endforeach()
  if(NOT sublet_torch_line)
    string(REPLACE ";" ", " sublet_pythons_text "${sublet_pythons}")
    string(CONCAT sublet_torch_line "no python3 with torch (tried ${sublet_pythons_text}): the PyTorch parity tests "
                  "skip. Install Debian's python3-torch (scripts/setup.sh with SUBLET_SETUP_TORCH=1) or pass "
                  "-DSUBLET_TORCH_PYTHON=/path/to/python3")
  endif()
else()
  set(sublet_torch_line "not looked for (SUBLET_BUILD_TESTS=OFF)")
endif()
sublet_report("torch" "${sublet_torch_line}")

# --- Eigen: the CPU kernels ---------------------------------------------------------------------
# Found REQUIRED at the top: a configure without it has already stopped.
if(Eigen3_FOUND)
  set(sublet_eigen_where "${EIGEN3_INCLUDE_DIR}")
  if(NOT sublet_eigen_where)
    set(sublet_eigen_where "${Eigen3_DIR}")
  endif()
  sublet_report("Eigen" "${Eigen3_VERSION} in ${sublet_eigen_where} (CPU kernels)")
endif()
