# The OpenCL device (src/devices/opencl), built when CMake finds the OpenCL
# headers and ICD loader (Debian: ocl-icd-opencl-dev, opencl-headers).
# Without them the sources still compile, to stubs that report "tandem was
# built without OpenCL". kernels.cl is embedded into libtandem as a generated
# C array. Included by the top-level CMakeLists after the tandem target.
find_package(OpenCL QUIET)
if(OpenCL_FOUND)
  target_compile_definitions(tandem PRIVATE TDM_HAVE_OPENCL=1 CL_TARGET_OPENCL_VERSION=120)
  target_link_libraries(tandem PUBLIC OpenCL::OpenCL)
  set(TDM_OCL_SRC_C ${CMAKE_BINARY_DIR}/gen/ocl_kernels_src.c)
  add_custom_command(
    OUTPUT ${TDM_OCL_SRC_C}
    COMMAND ${CMAKE_COMMAND} -DIN=${CMAKE_SOURCE_DIR}/src/devices/opencl/kernels.cl -DOUT=${TDM_OCL_SRC_C}
            -P ${CMAKE_SOURCE_DIR}/src/devices/opencl/embed_cl.cmake
    DEPENDS ${CMAKE_SOURCE_DIR}/src/devices/opencl/kernels.cl ${CMAKE_SOURCE_DIR}/src/devices/opencl/embed_cl.cmake
    COMMENT "Embedding the OpenCL kernels"
    VERBATIM)
  target_sources(tandem PRIVATE ${TDM_OCL_SRC_C})
  set(TDM_HAVE_OPENCL ON)
  message(STATUS "tandem: OpenCL device enabled (${OpenCL_LIBRARIES})")
else()
  set(TDM_HAVE_OPENCL OFF)
  message(STATUS "tandem: OpenCL not found; the opencl device is disabled")
endif()
