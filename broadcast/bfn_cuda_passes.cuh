/* The passes of one scalar type for bfn_cuda_instance.cuh: the primal pass
 * in namespace <sfx>_primal, then the counting and dual passes in <sfx>_dual
 * (see bfn_cpu_instance.h for why the dual instantiation counts first).
 * Included with DC_S and DC_SFX defined; no include guard. */

namespace DC_BFN_CUDA_NS
{
namespace DC_PP_CAT(DC_SFX, _primal)
{
#define DC_BFN_PASS _primal
#include "bfn_dsl_primal.h"
#include DC_BFN_FILE
#include "bfn_cuda_kernels.cuh"
#include "bfn_dsl_end.h"
#undef DC_BFN_PASS
} // namespace <sfx>_primal

namespace DC_PP_CAT(DC_SFX, _dual)
{
#define DC_BFN_PASS _count
#include "bfn_dsl_primal.h"
#include DC_BFN_FILE
#include "bfn_dsl_end.h"
#undef DC_BFN_PASS
#define DC_BFN_DUAL DC_PP_CAT(dc_bfn_dual_, DC_SFX)
#define DC_DUAL_T DC_BFN_DUAL
#define DC_DUAL_S DC_S
#define DC_DUAL_SFX DC_SFX
#define DC_DUAL_N (dc_bfn_nwrt_count > 0 ? dc_bfn_nwrt_count : 1)
#include "../dual/dual_impl.h"
#define DC_BFN_PASS _dual
#include "bfn_dsl_dual.h"
#include DC_BFN_FILE
#include "bfn_cuda_kernels.cuh"
#include "bfn_dsl_end.h"
#undef DC_BFN_PASS
#undef DC_BFN_DUAL
} // namespace <sfx>_dual
} // namespace DC_BFN_CUDA_NS
