# What `cmake --install build --prefix P` puts under P (docs/install.md):
#   bin/rnnc                     the compiler; it finds the headers below from
#                                its own directory (compiler/driver/Engine.cpp)
#   include/rnnc/*.h             the runtime headers generated code includes
#   lib/librnnc_runtime.a        the runtime (static, position-independent)
#   lib/librnnc_runtime_io.a     the array formats it links
#   lib/cmake/rnnc/              the CMake package: rnnc::rnnc, rnnc::runtime,
#                                rnnc::runtime_io and rnnc_add_model
# The build tree holds the same package in the build directory, for a project
# that uses a build without installing it: -Drnnc_DIR=<build>.
include(CMakePackageConfigHelpers)

set(RNNC_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/rnnc CACHE STRING
    "where the CMake package is installed, relative to the prefix")
set(RNNC_PACKAGE_FILES cmake/rnncAddModel.cmake cmake/rnncCompileModel.cmake)

install(TARGETS rnnc EXPORT rnncTargets RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS rnnc_runtime rnnc_runtime_io EXPORT rnncTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY runtime/include/rnnc DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(EXPORT rnncTargets NAMESPACE rnnc:: DESTINATION ${RNNC_INSTALL_CMAKEDIR})

# 0.x: a minor version may change the generated code's ABI, so only the same
# minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/rnncConfigVersion.cmake COMPATIBILITY SameMinorVersion)
configure_package_config_file(cmake/rnncConfig.cmake.in ${PROJECT_BINARY_DIR}/install/rnncConfig.cmake
  INSTALL_DESTINATION ${RNNC_INSTALL_CMAKEDIR})
install(FILES ${PROJECT_BINARY_DIR}/install/rnncConfig.cmake ${PROJECT_BINARY_DIR}/rnncConfigVersion.cmake
  ${RNNC_PACKAGE_FILES} DESTINATION ${RNNC_INSTALL_CMAKEDIR})

# The build tree's package: the same files, the targets where they are built
# (rnnc::runtime's headers are then the source tree's).
export(EXPORT rnncTargets NAMESPACE rnnc:: FILE ${PROJECT_BINARY_DIR}/rnncTargets.cmake)
configure_package_config_file(cmake/rnncConfig.cmake.in ${PROJECT_BINARY_DIR}/rnncConfig.cmake
  INSTALL_DESTINATION ${PROJECT_BINARY_DIR} INSTALL_PREFIX ${PROJECT_BINARY_DIR})
foreach(file IN LISTS RNNC_PACKAGE_FILES)
  get_filename_component(name ${file} NAME)
  configure_file(${file} ${PROJECT_BINARY_DIR}/${name} COPYONLY)
endforeach()
