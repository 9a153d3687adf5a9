# Compile-fail driver for the operator tests, run as `cmake -P`:
#   -DCXX=<compiler> -DSOURCE=<file.cpp> -DINCLUDES=<dir|dir|...>
# Like tests/compile_fail/run_compile_fail.cmake (a control build with
# SHARDCAST_COMPILE_FAIL_CONTROL defined must succeed, the misuse build must fail), but the
# file's `// expect: <regex>` line is a regular expression, so that it can check the mesh
# axis and placements the compiler prints in the instantiated error struct's name.
foreach(v CXX SOURCE INCLUDES)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_compile_fail.cmake: -D${v}=... is required")
  endif()
endforeach()
file(STRINGS "${SOURCE}" expect_lines REGEX "^// expect: ")
list(LENGTH expect_lines n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "${SOURCE}: needs exactly one '// expect: <regex>' line, found ${n}")
endif()
string(REGEX REPLACE "^// expect: " "" expected "${expect_lines}")
string(REPLACE "\\;" ";" expected "${expected}")
string(REPLACE "|" ";" include_list "${INCLUDES}")
set(args -std=c++20 -fsyntax-only -fdiagnostics-color=never)
foreach(d IN LISTS include_list)
  list(APPEND args "-I${d}")
endforeach()
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
if(NOT "${out}${err}" MATCHES "${expected}")
  message(FATAL_ERROR "${SOURCE} failed to compile, but not with the expected message\n  ${expected}\ndiagnostics:\n${out}${err}")
endif()
message(STATUS "${SOURCE}: rejected with the expected message")
