# dc_add_prod_sign_fns(target): the arity sweep's broadcast functions,
# prod_j (x_j > 0.5 ? x_j : -x_j) with 1 to 10 differentiable inputs
# (prod_sign_1 ... prod_sign_10), written from prod_sign.dc.h.in into the
# calling directory's build tree and instantiated into target. The GPU
# benchmark times them; the tests check their gradients.
function(dc_add_prod_sign_fns target)
  set(PROD_SIGN_INPUTS "DC_WRT(x1)")
  set(PROD_SIGN_MORE_FACTORS "")
  foreach(PROD_SIGN_ARITY RANGE 1 10)
    if(PROD_SIGN_ARITY GREATER 1)
      string(APPEND PROD_SIGN_INPUTS ", DC_WRT(x${PROD_SIGN_ARITY})")
      string(APPEND PROD_SIGN_MORE_FACTORS "    y = dc_mul(y, PROD_SIGN_FACTOR(x${PROD_SIGN_ARITY}));\n")
    endif()
    set(generated ${CMAKE_CURRENT_BINARY_DIR}/kernels/prod_sign_${PROD_SIGN_ARITY}.dc.h)
    configure_file(${CMAKE_CURRENT_FUNCTION_LIST_DIR}/prod_sign.dc.h.in ${generated} @ONLY)
    dc_add_broadcast_fn(${target} ${generated})
  endforeach()
endfunction()
