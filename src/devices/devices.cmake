# Devices (src/devices): cJSON for vnpu profiles, -ldl for plugins, and the
# shipped profiles (profiles/*.json) embedded into libtandem as a generated
# C source, so that `vnpu:edge-npu` works from any folder. Included by the
# top-level CMakeLists after the tandem target is defined.
pkg_check_modules(CJSON REQUIRED IMPORTED_TARGET libcjson)
target_link_libraries(tandem PUBLIC PkgConfig::CJSON ${CMAKE_DL_LIBS})

file(GLOB TDM_PROFILES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/profiles/*.json)
list(SORT TDM_PROFILES)
set(TDM_PROFILES_C ${CMAKE_BINARY_DIR}/gen/vnpu_profiles.c)
add_custom_command(
  OUTPUT ${TDM_PROFILES_C}
  COMMAND ${CMAKE_COMMAND} -DOUT=${TDM_PROFILES_C} "-DPROFILES=${TDM_PROFILES}"
          -P ${CMAKE_SOURCE_DIR}/src/devices/vnpu/embed_profiles.cmake
  DEPENDS ${TDM_PROFILES} ${CMAKE_SOURCE_DIR}/src/devices/vnpu/embed_profiles.cmake
  COMMENT "Embedding vnpu profiles"
  VERBATIM)
target_sources(tandem PRIVATE ${TDM_PROFILES_C})
