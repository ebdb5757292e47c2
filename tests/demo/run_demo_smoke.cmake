# Runs the HM-LSTM demo end to end on a tiny model, with the repository's own
# text as corpus, then with bad arguments, which must fail with a message.
# cmake -DDEMO=<hmlstm_demo> -DSOURCE_DIR=<source> -DWORK_DIR=<scratch> -P run_demo_smoke.cmake
foreach(v DEMO SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_demo_smoke.cmake needs -D${v}=...")
  endif()
endforeach()
file(MAKE_DIRECTORY "${WORK_DIR}")
set(corpus "${SOURCE_DIR}/README.md" "${SOURCE_DIR}/hmlstm_demo/README.md" "${SOURCE_DIR}/bench/RESULTS.md"
           "${SOURCE_DIR}/LICENSE")
set(args)
foreach(f ${corpus})
  list(APPEND args --corpus ${f})
endforeach()

execute_process(COMMAND "${DEMO}" ${args} --layers 2 --hidden 16 --embed 8 --out 16 --batch 4 --seq 16 --steps 6
                        --val-every 3 --val-batches 2 --sample 40 --compare 2 --checkpoint "${WORK_DIR}/smoke.ckpt"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the demo failed (${rc}):\n${out}\n${err}")
endif()
foreach(expect "validation:" "parameters saved to" "sample (temperature" "boundaries (" "mixed mode vs pure reverse mode")
  string(FIND "${out}" "${expect}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the demo's output lacks \"${expect}\":\n${out}")
  endif()
endforeach()
# resume from the checkpoint it wrote
execute_process(COMMAND "${DEMO}" ${args} --layers 2 --hidden 16 --embed 8 --out 16 --batch 4 --seq 16 --steps 1
                        --sample 0 --compare 0 --checkpoint "" --resume "${WORK_DIR}/smoke.ckpt"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "resuming failed (${rc}):\n${out}\n${err}")
endif()

function(expect_refusal words)
  execute_process(COMMAND "${DEMO}" ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(FIND "${err}" "${words}" at)
  if(rc EQUAL 0 OR at EQUAL -1)
    message(FATAL_ERROR "\"${ARGN}\": exit ${rc}, expected a failure saying \"${words}\":\n${out}\n${err}")
  endif()
endfunction()
expect_refusal("cannot read /nonexistent/corpus.txt" --corpus /nonexistent/corpus.txt)
expect_refusal("bad option or value: --hidden abc" --hidden abc)
expect_refusal("needs a value" --steps)
expect_refusal("bad option or value: --layers 0" --layers 0)
expect_refusal("give at least 10000" --corpus "${SOURCE_DIR}/LICENSE")
message(STATUS "demo smoke test: ok")
