# libtandem.so beside libtandem.a, and everything `make install` puts in
# place: both libraries, the public headers, tandem.pc, the CMake package
# (find_package(tandem) -> tandem::tandem, tandem::tandem_static), the CLI,
# its man page and the Python package. Included by the top-level
# CMakeLists after the tandem target and its device sources are defined.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The shared library reuses the static library's objects (compiled with
# -fPIC and hidden visibility), so nothing is compiled twice.
add_library(tandem_shared SHARED $<TARGET_OBJECTS:tandem>)
target_include_directories(tandem_shared
  PUBLIC $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(tandem_shared PRIVATE PkgConfig::PROTOBUFC PkgConfig::CJSON Threads::Threads m ${CMAKE_DL_LIBS})
if(TDM_HAVE_OPENCL)
  target_link_libraries(tandem_shared PRIVATE OpenCL::OpenCL)
endif()
set_target_properties(tandem_shared PROPERTIES
  OUTPUT_NAME tandem EXPORT_NAME tandem
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
if(NOT TDM_SANITIZE AND NOT TDM_FUZZ)
  target_link_options(tandem_shared PRIVATE -Wl,--no-undefined)
endif()

# tandem.pc: relocatable (prefix from the file's own folder), so that it
# also works from a DESTDIR staging tree.
file(RELATIVE_PATH TDM_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" TDM_PC_TO_PREFIX "${TDM_PC_TO_PREFIX}")
set(TDM_PC_REQUIRES "libprotobuf-c libcjson")
set(TDM_PC_LIBS "")
if(TDM_HAVE_OPENCL)
  pkg_check_modules(TDM_PC_OPENCL QUIET OpenCL)
  if(TDM_PC_OPENCL_FOUND)
    string(APPEND TDM_PC_REQUIRES " OpenCL")
  else()
    set(TDM_PC_LIBS "-lOpenCL ")
  endif()
endif()
string(APPEND TDM_PC_LIBS "-ldl -lpthread -lm")
configure_file(${CMAKE_SOURCE_DIR}/cmake/tandem.pc.in ${CMAKE_BINARY_DIR}/tandem.pc @ONLY)

configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/tandemConfig.cmake.in
  ${CMAKE_BINARY_DIR}/tandemConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tandem)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/tandemConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)

# Where the Python package goes: TDM_PYTHON_DIR (relative to the prefix),
# by default where the system python3 looks under this prefix (Debian:
# lib/python3/dist-packages under /usr, lib/python3.X/dist-packages
# elsewhere; upstream: lib/python3.X/site-packages).
if(NOT DEFINED TDM_PYTHON_DIR)
  set(TDM_PYTHON_DIR "")
  find_program(TDM_SYSTEM_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
  if(TDM_SYSTEM_PYTHON)
    execute_process(COMMAND ${TDM_SYSTEM_PYTHON} -c
      "import sys; d=any(p.endswith('dist-packages') for p in sys.path); v='%d.%d' % sys.version_info[:2]; print(('lib/python3/dist-packages' if '${CMAKE_INSTALL_PREFIX}' == '/usr' else 'lib/python'+v+'/dist-packages') if d else 'lib/python'+v+'/site-packages')"
      OUTPUT_VARIABLE TDM_PYTHON_DIR OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      set(TDM_PYTHON_DIR "")
    endif()
  endif()
  if(NOT TDM_PYTHON_DIR)
    set(TDM_PYTHON_DIR lib/python3/site-packages)
  endif()
endif()
# The installed package finds libtandem through a path relative to itself,
# which holds under DESTDIR too.
file(RELATIVE_PATH TDM_PY_TO_LIBDIR ${CMAKE_INSTALL_PREFIX}/${TDM_PYTHON_DIR}/tandem ${CMAKE_INSTALL_FULL_LIBDIR})
file(WRITE ${CMAKE_BINARY_DIR}/python/_installed.py
  "# Written by `make install`: where libtandem is, relative to this package.\nLIBDIR = \"${TDM_PY_TO_LIBDIR}\"\n")

install(TARGETS tandem tandem_shared EXPORT tandemTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS tandem_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${CMAKE_SOURCE_DIR}/include/tandem/tandem.h ${CMAKE_SOURCE_DIR}/include/tandem/device.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tandem)
install(EXPORT tandemTargets NAMESPACE tandem:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tandem)
install(FILES ${CMAKE_BINARY_DIR}/tandemConfig.cmake ${CMAKE_BINARY_DIR}/tandemConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tandem)
install(FILES ${CMAKE_BINARY_DIR}/tandem.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
install(FILES ${CMAKE_SOURCE_DIR}/man/tandem.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/python/tandem DESTINATION ${TDM_PYTHON_DIR}
  FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
install(FILES ${CMAKE_BINARY_DIR}/python/_installed.py DESTINATION ${TDM_PYTHON_DIR}/tandem)
