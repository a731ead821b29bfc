# cmake -DIN=kernels.cl -DOUT=ocl_kernels_src.c -P embed_cl.cmake
# Writes the OpenCL source as a NUL-terminated char array.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR nbytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){24})" "\\1\n" body "${body}")
file(WRITE ${OUT}.tmp
"/* Generated from src/devices/opencl/kernels.cl by embed_cl.cmake. Do not edit. */\n"
"#include <stddef.h>\n"
"extern const char ocl_kernels_src[];\n"
"extern const size_t ocl_kernels_src_len;\n"
"const char ocl_kernels_src[] = {\n${body}0x00};\n"
"const size_t ocl_kernels_src_len = ${nbytes};\n")
file(RENAME ${OUT}.tmp ${OUT})
