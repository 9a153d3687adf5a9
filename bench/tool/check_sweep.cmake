# The sweep goes on to -e whatever -b and -f: each row's size is the last times -f, and at
# least one byte more. From -b 0 with -f 2 it reaches 64 B (0, 1, 2, 4, ..., 64); from 8 B
# with -f 1.3 it makes several rows (8, 10, 13, 16, ..., 54), not one.
foreach(args "-b;0;-e;64;-f;2" "-b;8;-e;64;-f;1.3")
  execute_process(COMMAND ${TOOL} all_reduce --ranks 2 ${args} -n 1 -w 0 --warmup-ms 0 --no-roofline
                  OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "shardcast-bench ${args} failed (${rc}):\n${out}")
  endif()
  string(REGEX MATCHALL "\n +[0-9]+ +[0-9]+ +float" rows "${out}")
  list(LENGTH rows n)
  if(n LESS 5)
    message(FATAL_ERROR "shardcast-bench ${args}: ${n} rows, expected the sweep to go on to 64 B:\n${out}")
  endif()
  if(args MATCHES "-f;2" AND NOT out MATCHES "\n +64 +16 +float")
    message(FATAL_ERROR "shardcast-bench ${args} did not reach 64 B:\n${out}")
  endif()
  message(STATUS "${args}: ${n} rows")
endforeach()
