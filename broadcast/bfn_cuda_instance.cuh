/* Instantiates one broadcast function for CUDA: primal, dual and adjoint
 * kernels in float and double, from the same body the CPU instantiations
 * use. A generated .cu file defines DC_BFN_NAME and DC_BFN_FILE (as for
 * bfn_cpu_instance.h), then includes this file. Each pass lives in its own
 * namespace, so that the C++ overloads of the body language (bfn_dsl_dual.h)
 * never see another pass's types.
 *
 * Each pass is an operation on one element (bfn_cuda_kernels.cuh) run by the
 * loops of bfn_cuda_loops.cuh: inputs read in place through their strides (0
 * along broadcast axes, so broadcast inputs are never materialized), outputs
 * and partials written as one contiguous array each, 16 bytes per thread on
 * the contiguous fast path. The launchers return a cudaError_t. */

#include <cuda_runtime.h>
#include <stdint.h>

#include "../dual/scalar_math.h"
#include "bfn_cuda_loops.cuh"
#include "bfn_macros.h"
#include <dualcast/bfn_abi.h>

#define DC_BFN_CUDA_NS DC_PP_CAT(dc_bfn_cuda_impl_, DC_BFN_NAME)
#define DC_BFN_NIN_ DC_BFN_ID(dc_bfn_nin)
#define DC_BFN_NOUT_ DC_BFN_ID(dc_bfn_nout)
#define DC_BFN_NWRT_ DC_BFN_ID(dc_bfn_nwrt)

#define DC_S float
#define DC_SFX f32
#include "bfn_cuda_passes.cuh"
#undef DC_S
#undef DC_SFX

#define DC_S double
#define DC_SFX f64
#include "bfn_cuda_passes.cuh"
#undef DC_S
#undef DC_SFX

/* The launchers the descriptor points at, by dtype. */
namespace DC_BFN_CUDA_NS
{
static int f32_primal_launch(const dc_bfn_cuda_launch *L) { return f32_primal::launch_primal(L); }
static int f32_dual_launch(const dc_bfn_cuda_launch *L) { return f32_dual::launch_dual(L); }
static int f32_adjoint_launch(const dc_bfn_cuda_launch *L) { return f32_dual::launch_adjoint(L); }
static int f64_primal_launch(const dc_bfn_cuda_launch *L) { return f64_primal::launch_primal(L); }
static int f64_dual_launch(const dc_bfn_cuda_launch *L) { return f64_dual::launch_dual(L); }
static int f64_adjoint_launch(const dc_bfn_cuda_launch *L) { return f64_dual::launch_adjoint(L); }
} // namespace

extern "C" const dc_bfn_cuda_kernels DC_PP_CAT(dc_bfn_cuda_, DC_BFN_NAME)[2] = {
    {DC_BFN_CUDA_NS::f32_primal_launch, DC_BFN_CUDA_NS::f32_dual_launch,
     DC_BFN_CUDA_NS::f32_adjoint_launch},
    {DC_BFN_CUDA_NS::f64_primal_launch, DC_BFN_CUDA_NS::f64_dual_launch,
     DC_BFN_CUDA_NS::f64_adjoint_launch},
};
