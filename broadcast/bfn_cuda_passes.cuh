/* The passes of one scalar type for bfn_cuda_instance.cuh: the primal pass
 * in namespace <sfx>_primal, then the counting and dual passes in <sfx>_dual
 * (bfn_dual_begin.h, shared with the CPU instantiation).
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
#include "bfn_dual_begin.h"
#include "bfn_cuda_kernels.cuh"
#include "bfn_dsl_end.h"
#undef DC_BFN_PASS
#undef DC_BFN_DUAL
} // namespace <sfx>_dual
} // namespace DC_BFN_CUDA_NS
