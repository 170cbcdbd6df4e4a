# xgrammar's C++ core (Apache-2.0) for constrained decoding: JSON schemas, regexes, choices and EBNF
# grammars as per-token masks. Built from the pinned PyPI sdist that scripts/setup.sh fetches and
# checks (xgrammar 0.2.9, sha256 in setup.sh) into ~/.cache/loom/xgrammar-0.2.9; only its C++ sources
# are compiled, into a static library of our own (its own CMakeLists insists on the Python bindings).
# Without the sources Loom builds without structured output and says so; requests that ask for it
# are refused with a message, and its tests skip.
set(LOOM_XGRAMMAR_SOURCE "$ENV{HOME}/.cache/loom/xgrammar-0.2.9" CACHE PATH "xgrammar 0.2.9 source tree (from its PyPI sdist)")
set(LOOM_HAVE_XGRAMMAR OFF)
if(EXISTS "${LOOM_XGRAMMAR_SOURCE}/include/xgrammar/xgrammar.h")
  file(GLOB_RECURSE LOOM_XGRAMMAR_SOURCES CONFIGURE_DEPENDS "${LOOM_XGRAMMAR_SOURCE}/cpp/*.cc")
  list(FILTER LOOM_XGRAMMAR_SOURCES EXCLUDE REGEX "/cpp/tvm_ffi/")  # the Python bindings' glue
  add_library(loom_xgrammar STATIC ${LOOM_XGRAMMAR_SOURCES})
  target_include_directories(loom_xgrammar PUBLIC "${LOOM_XGRAMMAR_SOURCE}/include")
  target_include_directories(loom_xgrammar SYSTEM PUBLIC "${LOOM_XGRAMMAR_SOURCE}/3rdparty/picojson"
                                                         "${LOOM_XGRAMMAR_SOURCE}/3rdparty/dlpack/include")
  target_compile_definitions(loom_xgrammar PUBLIC XGRAMMAR_ENABLE_CPPTRACE=0 XGRAMMAR_ENABLE_INTERNAL_CHECK=0)
  set_target_properties(loom_xgrammar PROPERTIES CXX_STANDARD 17 POSITION_INDEPENDENT_CODE ON)
  target_compile_options(loom_xgrammar PRIVATE -w)  # third-party code: its warnings are not ours
  set(LOOM_HAVE_XGRAMMAR ON)
  message(STATUS "xgrammar: ${LOOM_XGRAMMAR_SOURCE} (structured output enabled)")
else()
  message(STATUS "xgrammar: not found at ${LOOM_XGRAMMAR_SOURCE} (run scripts/setup.sh); structured output disabled")
endif()
