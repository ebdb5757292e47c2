/* The passes of one scalar type for assoc_cuda_instance.cuh: the primal
 * pass (the scan kernel) in namespace <sfx>_primal, the dual pass (the
 * vector-Jacobian and scan-adjoint kernels) in <sfx>_dual.
 * Included with DC_S and DC_SFX defined; no include guard. */

namespace DC_ASSOC_CUDA_NS
{
namespace DC_PP_CAT(DC_SFX, _primal)
{
#define DC_BFN_PASS _primal
#include "bfn_dsl_primal.h"
#include DC_BFN_FILE
#include "assoc_kernels.h"

__global__ void scan_kernel(dc_assoc_scan_launch L, int64_t items)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < items; t += step)
        dc_assoc_scan_piece_primal(&L, t / L.inner, t % L.inner, t % L.inner + 1);
}

static int launch_scan(const dc_assoc_scan_launch *L)
{
    const int64_t n_chunks = L->len > 0 ? (L->len + L->chunk - 1) / L->chunk : 1;
    const int64_t items = (L->seg_start ? L->outer : L->outer * n_chunks) * L->inner;
    if (items == 0)
        return 0;
    scan_kernel<<<grid_for(items, L->block, L->max_blocks), L->block, 0, (cudaStream_t)L->stream>>>(*L, items);
    return (int)cudaGetLastError();
}

#include "bfn_dsl_end.h"
#undef DC_BFN_PASS
} // namespace <sfx>_primal

namespace DC_PP_CAT(DC_SFX, _dual)
{
#define DC_BFN_DUAL DC_PP_CAT(dc_assoc_dual_, DC_SFX)
#define DC_DUAL_T DC_BFN_DUAL
#define DC_DUAL_N (2 * DC_PP_CAT(DC_SFX, _primal)::dc_assoc_k_primal)
#include "../dual/dual_impl.h"

#define DC_BFN_PASS _dual
#include "bfn_dsl_dual.h"
#include DC_BFN_FILE
#include "assoc_kernels.h"

__global__ void vjp_kernel(dc_assoc_vjp_launch L, int64_t items)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < items; e += step)
        dc_assoc_vjp_element_dual(&L, e);
}

__global__ void scan_adjoint_kernel(dc_assoc_scan_adjoint_launch L, int64_t items)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < items; t += step)
        dc_assoc_scan_adjoint_item_dual(&L, t);
}

static int launch_vjp(const dc_assoc_vjp_launch *L)
{
    const int64_t items = L->shape[0] * L->shape[1] * L->shape[2];
    if (items == 0)
        return 0;
    vjp_kernel<<<grid_for(items, L->block, L->max_blocks), L->block, 0, (cudaStream_t)L->stream>>>(*L, items);
    return (int)cudaGetLastError();
}

static int launch_scan_adjoint(const dc_assoc_scan_adjoint_launch *L)
{
    const int64_t pieces = L->phase == DC_ASSOC_ADJ_MAPS || L->phase == DC_ASSOC_ADJ_PIECES
                               ? (L->len + L->chunk - 1) / L->chunk
                               : 1;
    const int64_t items = L->outer * pieces * L->inner;
    if (items == 0)
        return 0;
    scan_adjoint_kernel<<<grid_for(items, L->block, L->max_blocks), L->block, 0, (cudaStream_t)L->stream>>>(*L,
                                                                                                           items);
    return (int)cudaGetLastError();
}

#include "bfn_dsl_end.h"
#undef DC_BFN_PASS
#undef DC_BFN_DUAL
} // namespace <sfx>_dual
} // namespace DC_ASSOC_CUDA_NS
