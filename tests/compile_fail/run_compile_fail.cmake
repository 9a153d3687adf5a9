# Compile-fail driver, run as `cmake -P`:
#   -DCXX=<compiler> -DSOURCE=<file.cpp> -DINCLUDES=<dir|dir|...> [-DFLAGS=<flag|flag|...>]
#   [-DMATCH=literal|regex]
# SOURCE holds one misuse guarded by `#ifndef SHARDCAST_COMPILE_FAIL_CONTROL` and a line
#   // expect: <the library's static_assert sentence>
# which is matched verbatim (MATCH=literal, the default) or as a CMake regular expression
# (MATCH=regex: the operator tests use it to check the mesh axis and placements the
# compiler prints in the name of an instantiated error struct). The test passes only if
#   1. the control build (misuse compiled out) succeeds, so the failure below comes from the
#      misuse itself and not from a broken include or a typo, and
#   2. the misuse build fails, and
#   3. its diagnostics contain the expected sentence (or match the expression).
foreach(v CXX SOURCE INCLUDES)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_compile_fail.cmake: -D${v}=... is required")
  endif()
endforeach()
if(NOT DEFINED MATCH)
  set(MATCH literal)
endif()
if(NOT MATCH MATCHES "^(literal|regex)$")
  message(FATAL_ERROR "run_compile_fail.cmake: -DMATCH must be literal or regex, not '${MATCH}'")
endif()

file(STRINGS "${SOURCE}" expect_lines REGEX "^// expect: ")
list(LENGTH expect_lines n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "${SOURCE}: needs exactly one '// expect: <message>' line, found ${n}")
endif()
string(REGEX REPLACE "^// expect: " "" expected "${expect_lines}")
# file(STRINGS) escapes the semicolons the library's sentences use; undo that.
string(REPLACE "\\;" ";" expected "${expected}")

string(REPLACE "|" ";" include_list "${INCLUDES}")
set(args -std=c++20 -fsyntax-only -fdiagnostics-color=never)
foreach(d IN LISTS include_list)
  list(APPEND args "-I${d}")
endforeach()
if(DEFINED FLAGS AND NOT FLAGS STREQUAL "")
  string(REPLACE "|" ";" flag_list "${FLAGS}")
  list(APPEND args ${flag_list})
endif()

execute_process(COMMAND "${CXX}" ${args} -DSHARDCAST_COMPILE_FAIL_CONTROL "${SOURCE}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "control build of ${SOURCE} (misuse compiled out) failed; the test itself is broken:\n${out}${err}")
endif()

execute_process(COMMAND "${CXX}" ${args} "${SOURCE}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but the misuse must be rejected with:\n  ${expected}")
endif()
# Sets `result` to TRUE when `text` holds `wanted`: verbatim (MATCH=literal) or as a
# CMake regular expression (MATCH=regex).
function(holds text wanted result)
  set(found FALSE)
  if(MATCH STREQUAL "regex")
    string(REGEX MATCH "${wanted}" m "${text}")
    if(NOT m STREQUAL "")
      set(found TRUE)
    endif()
  else()
    string(FIND "${text}" "${wanted}" at)
    if(NOT at EQUAL -1)
      set(found TRUE)
    endif()
  endif()
  set(${result} ${found} PARENT_SCOPE)
endfunction()

set(wanted "${expected}")
if(MATCH STREQUAL "regex")
  # The expressions follow GCC's wording ("<instantiation>... static assertion failed: <message>").
  # clang words it "static_assert failed due to requirement '...' \"<message>\"" and prints
  # template arguments differently (default arguments left out): match the message alone.
  if("${out}${err}" MATCHES "static_assert failed" AND wanted MATCHES "static assertion failed: ")
    string(REGEX REPLACE "^.*static assertion failed: " "" wanted "${wanted}")
  endif()
endif()
holds("${out}${err}" "${wanted}" found)
if(NOT found)
  message(FATAL_ERROR "${SOURCE} failed to compile, but not with the expected message\n  ${expected}\ndiagnostics:\n${out}${err}")
endif()
# A source that also holds the line `// expect-first-error` wants that message in the
# first error the compiler prints (the one a user reads), not after unrelated ones.
file(STRINGS "${SOURCE}" first_lines REGEX "^// expect-first-error$")
if(first_lines)
  string(REGEX MATCH "[^\n]*error[^\n]*" first_error "${out}${err}")
  string(REGEX REPLACE "^.*static assertion failed: " "" msg "${expected}")
  holds("${first_error}" "${msg}" first_found)
  if(NOT first_found)
    message(FATAL_ERROR "${SOURCE}: the expected message is not in the first error\n  ${expected}\nfirst error:\n  ${first_error}\ndiagnostics:\n${out}${err}")
  endif()
endif()
message(STATUS "${SOURCE}: rejected with the expected message")
