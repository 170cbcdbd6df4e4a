# Turns one SPIR-V binary into a C++ source holding its words, so the plugin needs no shader files or
# runtime compiler. Usage: cmake -DSPV=in.spv -DOUT=out.cpp -DNAME=symbol -P embed_spirv.cmake
file(READ ${SPV} hex HEX)
string(LENGTH "${hex}" n_hex)
math(EXPR n_words "${n_hex} / 8")
# SPIR-V words are little-endian in the file: reverse the four bytes of each word.
string(REGEX REPLACE "([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])" "0x\\4\\3\\2\\1u,"
       body "${hex}")
string(REGEX REPLACE "((0x[0-9a-f]+u,){8})" "\\1\n" body "${body}")
file(WRITE ${OUT} "// Generated from ${SPV} by embed_spirv.cmake; do not edit.\n#include <cstddef>\n#include <cstdint>\n"
     "extern const uint32_t loom_vk_spv_${NAME}[];\nextern const size_t loom_vk_spv_${NAME}_words;\n"
     "const uint32_t loom_vk_spv_${NAME}[] = {\n${body}};\nconst size_t loom_vk_spv_${NAME}_words = ${n_words};\n")
