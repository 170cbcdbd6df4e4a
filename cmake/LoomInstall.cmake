# The SDK: headers, the loom::abi CMake package, the loom binary (with its conformance runner) and
# the in-tree plugins. A third party writes `find_package(Loom)` and links `loom::abi`.
include(CMakePackageConfigHelpers)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/core/include/loom DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS loom_abi EXPORT LoomTargets)
install(EXPORT LoomTargets NAMESPACE loom:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Loom)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/LoomConfig.cmake.in
  ${PROJECT_BINARY_DIR}/LoomConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Loom)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/LoomConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/LoomConfig.cmake ${PROJECT_BINARY_DIR}/LoomConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/LoomPlugin.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Loom)
