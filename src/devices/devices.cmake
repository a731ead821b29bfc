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

# The virtual NPU's vector rounding (vnpu_round_avx2.c): AVX2 and F16C, called
# only after a run-time check (vnpu_round_avx2_usable); a stub elsewhere.
check_c_compiler_flag("-mavx2 -mf16c" TDM_HAVE_F16C_FLAGS)
if(TDM_HAVE_F16C_FLAGS AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
  set_source_files_properties(${CMAKE_SOURCE_DIR}/src/devices/vnpu/vnpu_round_avx2.c
                              PROPERTIES COMPILE_OPTIONS "-O3;-mavx2;-mf16c")
endif()
