# Records warpbeam's version and the git commit it was built from in every product.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
                OUTPUT_VARIABLE WARPBEAM_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT WARPBEAM_GIT_COMMIT)
  set(WARPBEAM_GIT_COMMIT "unknown")
endif()
execute_process(COMMAND git status --porcelain --untracked-files=no
                WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
                OUTPUT_VARIABLE _wb_dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(_wb_dirty)
  string(APPEND WARPBEAM_GIT_COMMIT "-dirty")
endif()
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/version.hpp.in
               ${CMAKE_CURRENT_BINARY_DIR}/include/warpbeam/version.hpp @ONLY)
