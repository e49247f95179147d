# `cmake --install <build> --prefix P` lays sublet out for other CMake projects:
#   P/bin/sublet                          the CLI
#   P/include/sublet/{core,memory,...}/   every header, in the source layout: users include
#                                         <sublet/runtime/tensor.h>; the headers' own includes
#                                         ("core/errors.h") resolve through P/include/sublet
#   P/lib/libsublet_<name>.a              the libraries (sublet_add_library in the top CMakeLists.txt:
#                                         core, memory, analysis, ops, tensor, nn, optim, amp, io,
#                                         data, step, distributed, data_parallel, models, training,
#                                         profiling; runtime is an interface over the runtime ones)
#   P/lib/cmake/sublet/                   subletConfig.cmake, its version file, the exported
#                                         targets and FindCUDNN.cmake
# A consumer writes find_package(sublet REQUIRED) and links sublet::sublet (everything but the
# CLI and the benchmarks) or single libraries (sublet::runtime, sublet::tensor, ...), the same names
# a project that adds sublet with add_subdirectory or FetchContent links. examples/find_package_consumer
# is such a project; scripts/check_install.sh builds and runs it against an installed prefix.
# Tests, fuzz targets, benchmarks and the examples library are not installed.
include(CMakePackageConfigHelpers)

set(SUBLET_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/sublet")
set(SUBLET_INSTALL_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}/sublet")
# Every sublet_add_library target, floor by floor (sublet_<name>, exported as sublet::<name>), and
# sublet::sublet over all of them (the top CMakeLists.txt).
get_property(SUBLET_INSTALLED_LIBRARIES GLOBAL PROPERTY SUBLET_LIBRARIES)

install(TARGETS ${SUBLET_INSTALLED_LIBRARIES} sublet_package
  EXPORT subletTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The CLI links cuBLAS and cuDNN (shared) from outside the build tree: keep those directories in
# the installed binary's RPATH, as the build tree's binary has them.
if(TARGET sublet)
  set_target_properties(sublet PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
  install(TARGETS sublet RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
# The Gloo shim beside the binary, where the loader looks first (gloo_library.h).
if(TARGET sublet_gloo)
  install(TARGETS sublet_gloo LIBRARY DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# Every header of the installed floors, folder layout kept. The CUDA-only headers go too (in a
# CPU build nothing includes them); sources and CMake lists do not.
install(DIRECTORY core memory analysis ops runtime models train profile
  DESTINATION ${SUBLET_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh")

install(EXPORT subletTargets
  NAMESPACE sublet::
  DESTINATION ${SUBLET_INSTALL_CMAKEDIR}
  FILE subletTargets.cmake)

# subletConfig.cmake.in reads these: whether this is a CUDA build, and which toolkit it used.
set(SUBLET_CONFIG_CUDA_VERSION_MAJOR "")
set(SUBLET_CONFIG_CUDA_ROOT "")
if(SUBLET_HAVE_CUDA)
  set(SUBLET_CONFIG_CUDA_VERSION_MAJOR ${CUDAToolkit_VERSION_MAJOR})
  get_filename_component(SUBLET_CONFIG_CUDA_ROOT "${CUDAToolkit_BIN_DIR}" DIRECTORY)
endif()
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/subletConfig.cmake.in
  ${PROJECT_BINARY_DIR}/package/subletConfig.cmake
  INSTALL_DESTINATION ${SUBLET_INSTALL_CMAKEDIR})
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/package/subletConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMajorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/package/subletConfig.cmake
  ${PROJECT_BINARY_DIR}/package/subletConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/FindCUDNN.cmake
  DESTINATION ${SUBLET_INSTALL_CMAKEDIR})
