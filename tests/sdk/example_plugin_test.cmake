# Driven by CTest (see CMakeLists.txt beside this file). Fails on the first step that fails.
function(step description)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${description}:\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "SDK test: '${description}' failed with exit code ${rc}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/install)
step("install the SDK" ${CMAKE_COMMAND} --install ${LOOM_BINARY_DIR} --prefix ${prefix})
step("configure the example against the installed SDK only"
     ${CMAKE_COMMAND} -S ${LOOM_SOURCE_DIR}/examples/quantizer-q8 -B ${WORK_DIR}/example -G Ninja
     -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
step("build the example" ${CMAKE_COMMAND} --build ${WORK_DIR}/example)
step("installed loom lists it" ${CMAKE_COMMAND} -E env LOOM_PLUGIN_PATH=${WORK_DIR}/example ${prefix}/bin/loom plugins)
if(NOT last_output MATCHES "example_q8  kind=quantizer")
  message(FATAL_ERROR "SDK test: `loom plugins` did not list example_q8")
endif()
step("installed loom runs conformance on it"
     ${prefix}/bin/loom conformance --plugin ${WORK_DIR}/example/libexample_q8.so --json ${WORK_DIR}/example.json)
if(NOT last_output MATCHES " 0 failed")
  message(FATAL_ERROR "SDK test: conformance reported failures")
endif()
