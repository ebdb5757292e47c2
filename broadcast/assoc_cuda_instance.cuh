/* Instantiates one associative operator for CUDA: the scan, vector-Jacobian
 * and scan-adjoint launchers in float and double, from the same body and
 * the same work items (assoc_kernels.h) as the CPU instantiation. A
 * generated .cu file defines DC_ASSOC_NAME and DC_BFN_FILE, then includes
 * this file. Each pass lives in its own namespace (assoc_cuda_passes.cuh),
 * as for broadcast functions, so that the C++ overloads of the dual pass
 * never see another pass's types.
 *
 * Every kernel is a grid-stride loop over the launch's work items: one
 * thread per element of a vector-Jacobian product, per piece (or row) and
 * lane of a scan's or a reduction's adjoint, per piece and lane of a scan,
 * except that where a row has one lane and at least two steps a thread, a
 * piece is one block's, in the scan (scan_block_kernel) and in the
 * adjoints (scan_adjoint_block_kernel, scan_adjoint_carries_block_kernel,
 * reduce_adjoint_block_kernel). The pieces are the CPU's. No atomics: each
 * item writes its own elements. The launchers return a cudaError_t. */

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "../dual/scalar_math.h"
#include "assoc_macros.h"
#include <dualcast/assoc_abi.h>

#define DC_ASSOC_CUDA_NS DC_PP_CAT(dc_assoc_cuda_impl_, DC_ASSOC_NAME)

namespace DC_ASSOC_CUDA_NS
{
/* The grid for `items` work items of `block` threads, capped. */
static inline unsigned grid_for(int64_t items, int block, int max_blocks)
{
    int64_t blocks = (items + block - 1) / block;
    if (blocks > max_blocks)
        blocks = max_blocks;
    return (unsigned)(blocks > 0 ? blocks : 1);
}
} // namespace

#define DC_S float
#define DC_SFX f32
#include "assoc_cuda_passes.cuh"
#undef DC_S
#undef DC_SFX

#define DC_S double
#define DC_SFX f64
#include "assoc_cuda_passes.cuh"
#undef DC_S
#undef DC_SFX

extern "C" const dc_assoc_cuda_kernels DC_PP_CAT(dc_assoc_cuda_, DC_ASSOC_NAME)[2] = {
    {DC_ASSOC_CUDA_NS::f32_primal::launch_scan, DC_ASSOC_CUDA_NS::f32_dual::launch_vjp,
     DC_ASSOC_CUDA_NS::f32_dual::launch_scan_adjoint, DC_ASSOC_CUDA_NS::f32_dual::launch_reduce_adjoint},
    {DC_ASSOC_CUDA_NS::f64_primal::launch_scan, DC_ASSOC_CUDA_NS::f64_dual::launch_vjp,
     DC_ASSOC_CUDA_NS::f64_dual::launch_scan_adjoint, DC_ASSOC_CUDA_NS::f64_dual::launch_reduce_adjoint},
};
