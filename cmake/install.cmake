include(CMakePackageConfigHelpers)
install(TARGETS shardcast EXPORT shardcast-targets)
install(DIRECTORY include/shardcast DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT shardcast-targets NAMESPACE shardcast:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shardcast)
configure_package_config_file(cmake/shardcast-config.cmake.in
  ${PROJECT_BINARY_DIR}/shardcast-config.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shardcast)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/shardcast-config-version.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${PROJECT_BINARY_DIR}/shardcast-config.cmake ${PROJECT_BINARY_DIR}/shardcast-config-version.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shardcast)
