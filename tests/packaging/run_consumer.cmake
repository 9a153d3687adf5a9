# Packaging driver, run as `cmake -P`:
#   -DMODE=find_package|subdirectory -DSOURCE_DIR=<shardcast source> -DBINARY_DIR=<shardcast build>
#   -DWORK_DIR=<scratch dir> -DGENERATOR=<generator> -DCXX=<compiler> [-DBUILD_TYPE=<type>]
# find_package: installs the shardcast build into WORK_DIR/prefix, then configures the consumer
# with CMAKE_PREFIX_PATH pointing there. subdirectory: the consumer add_subdirectory()s the
# source tree. Either way the consumer's two programs (consumer, consumer_plans) are built
# with CXX and run; their exit codes decide the test.
foreach(v MODE SOURCE_DIR BINARY_DIR WORK_DIR GENERATOR CXX)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_consumer.cmake: -D${v}=... is required")
  endif()
endforeach()
if(NOT BUILD_TYPE)
  set(BUILD_TYPE Release)
endif()

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}${err}")
  endif()
  message(STATUS "${what}: ok")
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(consumer_build "${WORK_DIR}/build")
set(here "${CMAKE_CURRENT_LIST_DIR}")

if(MODE STREQUAL "find_package")
  set(prefix "${WORK_DIR}/prefix")
  step("install shardcast into ${prefix}" "${CMAKE_COMMAND}" --install "${BINARY_DIR}" --prefix "${prefix}")
  if(NOT EXISTS "${prefix}/include/shardcast/layout.hpp")
    message(FATAL_ERROR "install tree lacks include/shardcast/layout.hpp")
  endif()
  step("configure consumer (find_package)" "${CMAKE_COMMAND}" -S "${here}/consumer_find_package" -B "${consumer_build}"
       -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${CXX}" "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}"
       "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
elseif(MODE STREQUAL "subdirectory")
  step("configure consumer (add_subdirectory)" "${CMAKE_COMMAND}" -S "${here}/consumer_subdirectory" -B "${consumer_build}"
       -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${CXX}" "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}"
       "-DSHARDCAST_SOURCE_DIR=${SOURCE_DIR}")
else()
  message(FATAL_ERROR "run_consumer.cmake: unknown MODE '${MODE}'")
endif()

step("build consumer" "${CMAKE_COMMAND}" --build "${consumer_build}" --target consumer consumer_plans)
foreach(program consumer consumer_plans)
  execute_process(COMMAND "${consumer_build}/${program}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${program} (${MODE}) exited with ${rc}")
  endif()
endforeach()
