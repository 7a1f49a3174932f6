# Sanitizers and fuzzing (issue 18; the `sanitize` preset, scripts/test and docs/FUZZING.md).
#
# WARPBEAM_SANITIZE=address,undefined builds every C/C++ target (library, CLI, tests) with ASan and
# UBSan; any report aborts the process (-fno-sanitize-recover), so a test with a report fails.
# WARPBEAM_FUZZ=ON (clang only) also instruments the library for libFuzzer and builds the targets
# of tests/fuzz/. Without clang the fuzz targets are skipped with one message.
set(WARPBEAM_SANITIZE "" CACHE STRING "Sanitizers for every C/C++ target, e.g. address,undefined")
option(WARPBEAM_FUZZ "Build the libFuzzer targets of tests/fuzz/ (needs clang)" OFF)

if(WARPBEAM_SANITIZE)
  set(_wb_san -fsanitize=${WARPBEAM_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer -g)
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_wb_san}>")
  add_link_options(-fsanitize=${WARPBEAM_SANITIZE})
  message(STATUS "warpbeam: sanitizers ON (${WARPBEAM_SANITIZE})")
endif()

set(WARPBEAM_HAVE_FUZZ OFF)
if(WARPBEAM_FUZZ)
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    set(WARPBEAM_HAVE_FUZZ ON)
    add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link>")
    message(STATUS "warpbeam: libFuzzer targets ON (tests/fuzz)")
  else()
    message(STATUS "warpbeam: libFuzzer needs clang (CMAKE_CXX_COMPILER=clang++): fuzz targets disabled")
  endif()
endif()
