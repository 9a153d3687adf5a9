# The command line as nccl-tests users expect it: -h/--help print the usage on stdout and
# exit 0 (also after a collective or `redistribute`); bad values exit 2 with a message
# (a non-finite -f, -i 0, a mesh axis too large for an int, a JSON file that cannot be
# written); a step factor so large that size * f passes what a size_t holds ends the
# sweep; and with -w 0 the redistribute mode still counts the redistributes alone (the
# first call, which agrees on the conversion across the ranks, is not counted).
#   cmake -DTOOL=<shardcast-bench> -P check_cli.cmake
function(expect rc_want pattern)
  execute_process(COMMAND ${TOOL} ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL rc_want)
    message(FATAL_ERROR "shardcast-bench ${ARGN}: exit ${rc}, expected ${rc_want}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  if(NOT "${out}${err}" MATCHES "${pattern}")
    message(FATAL_ERROR "shardcast-bench ${ARGN}: output does not match '${pattern}'\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  set(last_out "${out}" PARENT_SCOPE)
  message(STATUS "${ARGN}: exit ${rc} as expected")
endfunction()

expect(0 "^usage: .*all_reduce.* or: .*redistribute --from L --to L2" --help)
expect(0 "^usage: " all_reduce -b 8 -h)
expect(0 "^usage: shardcast-bench redistribute --from L --to L2" redistribute --help)
expect(2 "-f must be a finite number" all_reduce --ranks 2 -b 8 -e 64 -f inf)
expect(2 "-i must be at least 1 byte" all_reduce --ranks 2 -b 8 -e 64 -i 0)
expect(0 "Avg bus bandwidth" all_reduce --ranks 2 -b 8 -e 64 -f 1e19 -n 1 -w 0 --warmup-ms 0 --no-roofline)
string(REGEX MATCHALL "\n +[0-9]+ +[0-9]+ +float" rows "${last_out}")
list(LENGTH rows n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "-b 8 -e 64 -f 1e19: ${n} rows, expected one (8 B):\n${last_out}")
endif()
expect(2 "every axis needs 1 to 65536 ranks" redistribute --from "S(0)" --to R --mesh 4294967298 --extents 8x8)
expect(2 "cannot write /nonexistent-dir/a.json" redistribute --from "S(0)" --to R --mesh 2 --extents 8x8 -n 1 -w 0 --json /nonexistent-dir/a.json)
expect(0 "\n +256 +[0-9.]+ +[0-9.]+ +128 +128 +1.000 +0\n" redistribute --from "S(0)" --to R --mesh 2 --extents 8x8 -n 1 -w 0)
