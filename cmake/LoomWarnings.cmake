# Strict warnings for Loom's own targets; third-party headers are included as SYSTEM.
function(loom_strict_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wpedantic -Wshadow=local -Wno-missing-field-initializers>
      $<$<AND:$<COMPILE_LANGUAGE:CXX,C>,$<BOOL:${LOOM_WERROR}>>:-Werror>)
  endif()
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12)
    # GCC 12's middle-end warnings misfire on inlined std::string / std::vector code at -O3
    # (GCC PR 105329, 105651, 106199): they point into libstdc++, never at our code.
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict -Wno-stringop-overflow -Wno-stringop-overread -Wno-array-bounds>)
  endif()
endfunction()

# A plugin is a MODULE library with a manifest beside it, collected in one folder.
function(loom_add_plugin target)
  cmake_parse_arguments(ARG "" "KIND;MANIFEST" "SOURCES" ${ARGN})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE loom::abi)
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    LIBRARY_OUTPUT_DIRECTORY ${LOOM_PLUGIN_BUILD_DIR}
    CXX_VISIBILITY_PRESET hidden
    C_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  loom_strict_warnings(${target})
  # The manifest lets `loom plugins` describe a plugin without loading it.
  configure_file(${ARG_MANIFEST} ${LOOM_PLUGIN_BUILD_DIR}/${target}.toml @ONLY)
  install(TARGETS ${target} LIBRARY DESTINATION ${LOOM_PLUGIN_INSTALL_DIR})
  install(FILES ${LOOM_PLUGIN_BUILD_DIR}/${target}.toml DESTINATION ${LOOM_PLUGIN_INSTALL_DIR})
  set_property(GLOBAL APPEND PROPERTY LOOM_INTREE_PLUGINS ${target})
endfunction()
