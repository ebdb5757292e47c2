# Builds this source tree with AddressSanitizer and UndefinedBehaviorSanitizer
# (DC_SANITIZE=ON, CPU only) and runs its whole test suite there, with
# DC_POISON=1 and allocations that may fail (allocator_may_return_null).
# cmake -DDC_SOURCE_DIR=<source> -DWORK_DIR=<scratch> -P run_sanitized.cmake
foreach(v DC_SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_sanitized.cmake needs -D${v}=...")
  endif()
endforeach()

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "sanitizer build: ${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok")
endfunction()

step("configure" ${CMAKE_COMMAND} -S "${DC_SOURCE_DIR}" -B "${WORK_DIR}" -DDC_SANITIZE=ON -DDC_CUDA=OFF
     -DDC_BUILD_BENCH=OFF -DDC_BUILD_DEMO=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDC_SANITIZER_SUITE=OFF)
step("build" ${CMAKE_COMMAND} --build "${WORK_DIR}" --parallel 2)
# Leaks are errors too, and a failed allocation returns NULL, as malloc does
# outside ASan, so that the library's out-of-memory paths run here too (ASan
# would end the process).
set(ENV{ASAN_OPTIONS} "detect_leaks=1:abort_on_error=0:allocator_may_return_null=1")
set(ENV{UBSAN_OPTIONS} "print_stacktrace=1:halt_on_error=1")
# and memory that must be written before it is read starts as NaN (the
# library's DC_POISON), so that reading it shows in the results
set(ENV{DC_POISON} 1)
# two at a time: by then the suite around this one has mostly finished.
# package_consumer, which configures and builds a project against the
# installed package (about 65 s here, this suite's longest test), runs in the
# main suite; here it would check the same install with other flags, on the
# path that decides CI's length.
step("tests" ${CMAKE_CTEST_COMMAND} --test-dir "${WORK_DIR}" --output-on-failure --parallel 2
     --exclude-regex "^package_consumer$")
