/* Ends the body language of the current pass (bfn_dsl_primal.h or
 * bfn_dsl_dual.h), so that the next pass can define it anew. The operator
 * names of bfn_dsl_ops.h stay: each pass redefines only what they expand to. */
#undef dc_var
#undef dc_real
#undef DC_BFN_SEED
#undef DC_BFN_VALUE
#undef DC_BFN_PARTIAL
#undef DC_BFN_P_
#undef DC_BFN_D_
#undef DC_BFN_VAL
#undef DC_BFN_CONST
#undef DC_BFN_UNARY
#undef DC_BFN_BINARY
#undef DC_BFN_HARD_SIGMOID
