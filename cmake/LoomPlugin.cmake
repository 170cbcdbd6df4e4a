# For out-of-tree plugins built against an installed Loom SDK:
#   loom_sdk_add_plugin(my_sampler KIND sampler SOURCES my_sampler.c)
# builds a MODULE library and writes its manifest beside it, ready for LOOM_PLUGIN_PATH.
function(loom_sdk_add_plugin target)
  cmake_parse_arguments(ARG "" "KIND;VERSION;DESCRIPTION" "SOURCES" ${ARGN})
  if(NOT ARG_VERSION)
    set(ARG_VERSION 0.1.0)
  endif()
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE loom::abi)
  set_target_properties(${target} PROPERTIES PREFIX "lib" C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden)
  file(GENERATE OUTPUT $<TARGET_FILE_DIR:${target}>/${target}.toml CONTENT
"# Loom plugin manifest
name = \"${target}\"
kind = \"${ARG_KIND}\"
library = \"$<TARGET_FILE_NAME:${target}>\"
version = \"${ARG_VERSION}\"
description = \"${ARG_DESCRIPTION}\"
abi_major = 1
abi_minor = 0
")
endfunction()
