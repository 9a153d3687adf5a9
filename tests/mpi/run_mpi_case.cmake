# Runs one MPI job and checks how it ended, as `cmake -P`:
#   -DMPIEXEC=<mpiexec> -DNP=<ranks> -DFLAGS=<flag|flag|...> -DEXE=<program> -DARGS=<arg|arg|...>
#   -DEXPECT_EXIT=zero|nonzero -DEXPECT=<regex|regex|...> [-DTIMEOUT=<seconds>]
# Passes when the job ends within TIMEOUT (default 60 s), its exit status is zero or
# non-zero as asked, and its combined stdout and stderr match every regex in EXPECT.
foreach(v MPIEXEC NP EXE EXPECT_EXIT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_mpi_case.cmake: -D${v}=... is required")
  endif()
endforeach()
if(NOT DEFINED TIMEOUT)
  set(TIMEOUT 60)
endif()
string(REPLACE "|" ";" flag_list "${FLAGS}")
string(REPLACE "|" ";" arg_list "${ARGS}")
string(REPLACE "|" ";" expect_list "${EXPECT}")

string(TIMESTAMP t0 "%s")
execute_process(COMMAND "${MPIEXEC}" -np ${NP} ${flag_list} "${EXE}" ${arg_list}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${TIMEOUT})
string(TIMESTAMP t1 "%s")
math(EXPR secs "${t1} - ${t0}")
set(all "${out}${err}")
message(STATUS "exit: ${rc} after ${secs} s\n${all}")

if(rc MATCHES "timeout" OR rc MATCHES "Process terminated")
  message(FATAL_ERROR "the job did not end within ${TIMEOUT} s (${rc}): a rank hung")
endif()
if(EXPECT_EXIT STREQUAL "zero" AND NOT rc EQUAL 0)
  message(FATAL_ERROR "expected exit status 0, got ${rc}")
endif()
if(EXPECT_EXIT STREQUAL "nonzero" AND (rc EQUAL 0 OR NOT rc MATCHES "^[0-9]+$"))
  message(FATAL_ERROR "expected a non-zero exit status, got '${rc}'")
endif()
foreach(re IN LISTS expect_list)
  if(NOT all MATCHES "${re}")
    message(FATAL_ERROR "the output does not match '${re}'")
  endif()
endforeach()
