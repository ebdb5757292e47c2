/* Opens the dual pass of one broadcast function, for the CPU and the CUDA
 * instantiations alike: compiles the body once on plain numbers (the
 * counting pass, whose enums give the number of differentiable inputs),
 * makes the dual-number type DC_BFN_DUAL with one partial per such input,
 * then compiles the body again on it, as pass _dual. The includer then
 * defines its kernels (on dc_var, dc_real and the body) and closes the pass.
 * Included with DC_S, DC_SFX and DC_BFN_FILE defined; no include guard. */

#define DC_BFN_PASS _count
#include "bfn_dsl_primal.h"
#include DC_BFN_FILE
#include "bfn_dsl_end.h"
#undef DC_BFN_PASS

#define DC_BFN_DUAL DC_PP_CAT(dc_bfn_dual_, DC_SFX)
#define DC_DUAL_T DC_BFN_DUAL
#define DC_DUAL_N (dc_bfn_nwrt_count > 0 ? dc_bfn_nwrt_count : 1)
#include "../dual/dual_impl.h"

#define DC_BFN_PASS _dual
#include "bfn_dsl_dual.h"
#include DC_BFN_FILE
