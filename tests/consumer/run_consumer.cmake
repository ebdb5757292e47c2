# Installs the dualcast just built into a scratch prefix, then configures,
# builds and runs tests/consumer against it, as a separate project would.
# cmake -DDC_BUILD_DIR=<build> -DDC_SOURCE_DIR=<source> -DWORK_DIR=<scratch> [-DSANITIZE=ON] -P run_consumer.cmake
# With SANITIZE (a sanitizer build of dualcast) the consumer is built with the
# same sanitizers, whose runtime must come first in the program.
foreach(v DC_BUILD_DIR DC_SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_consumer.cmake needs -D${v}=...")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer test: ${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

step("install" ${CMAKE_COMMAND} --install "${DC_BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
set(sanitize_args "")
if(SANITIZE)
  set(sanitize_args "-DCMAKE_C_FLAGS=-fsanitize=address,undefined -fno-sanitize-recover=undefined"
                    "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined")
endif()
step("configure" ${CMAKE_COMMAND} -S "${DC_SOURCE_DIR}/tests/consumer" -B "${WORK_DIR}/build"
     -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release ${sanitize_args})
step("build" ${CMAKE_COMMAND} --build "${WORK_DIR}/build")
step("run" "${WORK_DIR}/build/consumer")
message(STATUS "${step_output}")
