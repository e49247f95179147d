# Finds cuDNN and defines the imported target CUDNN::cudnn.
# Looks next to the CUDA toolkit first, then in the system paths; CUDNN_ROOT overrides.
find_path(CUDNN_INCLUDE_DIR cudnn.h
  HINTS ${CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}
  PATH_SUFFIXES include)
find_library(CUDNN_LIBRARY cudnn
  HINTS ${CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
  PATH_SUFFIXES lib64 lib)
if(CUDNN_INCLUDE_DIR AND EXISTS "${CUDNN_INCLUDE_DIR}/cudnn_version.h")
  file(STRINGS "${CUDNN_INCLUDE_DIR}/cudnn_version.h" _cudnn_lines REGEX "#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ")
  foreach(_part MAJOR MINOR PATCHLEVEL)
    string(REGEX MATCH "CUDNN_${_part} +([0-9]+)" _m "${_cudnn_lines}")
    set(CUDNN_${_part} ${CMAKE_MATCH_1})
  endforeach()
  set(CUDNN_VERSION "${CUDNN_MAJOR}.${CUDNN_MINOR}.${CUDNN_PATCHLEVEL}")
endif()
include(FindPackageHandleStandardArgs)
string(REPLACE ";" ", " _cudnn_toolkit_includes "${CUDAToolkit_INCLUDE_DIRS}")  # a list would split the message
find_package_handle_standard_args(CUDNN REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR VERSION_VAR CUDNN_VERSION
  REASON_FAILURE_MESSAGE "the CUDA backend's convolutions and batch norm need cuDNN 9 (cudnn.h, libcudnn.so), \
looked for next to the CUDA toolkit (${_cudnn_toolkit_includes}) and in the system paths. Install libcudnn9-dev-cuda-13 \
from NVIDIA's CUDA repository (or Debian contrib's nvidia-cudnn), or pass -DCUDNN_ROOT=/path/to/cudnn. \
-DSUBLET_WITH_CUDA=OFF builds CPU-only")
if(CUDNN_FOUND AND NOT TARGET CUDNN::cudnn)
  add_library(CUDNN::cudnn UNKNOWN IMPORTED)
  set_target_properties(CUDNN::cudnn PROPERTIES
    IMPORTED_LOCATION "${CUDNN_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
endif()
mark_as_advanced(CUDNN_INCLUDE_DIR CUDNN_LIBRARY)
