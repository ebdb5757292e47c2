# Installs the dualcast just built into a scratch prefix, then configures,
# builds and runs tests/consumer against it, as a separate project would.
# cmake -DDC_BUILD_DIR=<build> -DDC_SOURCE_DIR=<source> -DWORK_DIR=<scratch> [-DSANITIZE=ON]
#       [-DGNU_CC=<gcc>] -P run_consumer.cmake
# With SANITIZE (a sanitizer build of dualcast) the consumer is built with the
# same sanitizers, whose runtime must come first in the program. With GNU_CC
# (gcc, as the library was built with), the consumer is built a second time
# with that gcc behind a wrapper that refuses --param=max-unswitch-level, as
# gcc 13 and newer do (they renamed it max-unswitch-depth): the installed
# dc_add_broadcast_fn must pass only the options the compiler in use takes.
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

if(DEFINED GNU_CC AND NOT GNU_CC STREQUAL "")
  set(wrapper "${WORK_DIR}/gcc13_params")
  file(WRITE "${wrapper}" "#!/bin/sh
for a in \"$@\"; do
  case \"$a\" in
    --param=max-unswitch-level=*)
      echo \"gcc: error: unrecognized command-line option '$a'; did you mean '--param=max-unswitch-depth='?\" >&2
      exit 1 ;;
  esac
done
exec \"${GNU_CC}\" \"$@\"
")
  file(CHMOD "${wrapper}" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
  step("configure with gcc 13's --param names" ${CMAKE_COMMAND} -S "${DC_SOURCE_DIR}/tests/consumer"
       -B "${WORK_DIR}/build_gcc13" -DCMAKE_C_COMPILER=${wrapper} -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
       -DCMAKE_BUILD_TYPE=Release ${sanitize_args})
  step("build with gcc 13's --param names" ${CMAKE_COMMAND} --build "${WORK_DIR}/build_gcc13")
  step("run the gcc 13 build" "${WORK_DIR}/build_gcc13/consumer")
endif()
