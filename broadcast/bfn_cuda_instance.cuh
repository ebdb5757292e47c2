/* Instantiates one broadcast function for CUDA: primal, dual and adjoint
 * kernels in float and double, from the same body the CPU instantiations
 * use. A generated .cu file defines DC_BFN_NAME and DC_BFN_FILE (as for
 * bfn_cpu_instance.h), then includes this file. Each pass lives in its own
 * namespace, so that the C++ overloads of the body language (bfn_dsl_dual.h)
 * never see another pass's types.
 *
 * A kernel thread handles elements e, e + stride, ... of the broadcast shape:
 * it finds each input's element through the input's strides (0 along
 * broadcast axes, so broadcast inputs are read in place), runs the body, and
 * writes outputs and partials, each one contiguous array: consecutive threads
 * store consecutive addresses. The launchers return a cudaError_t. */

#include <cuda_runtime.h>
#include <stdint.h>

#include "../dual/scalar_math.h"
#include "bfn_macros.h"
#include <dualcast/bfn_abi.h>

/* Element offsets of element e in every input. */
#define DC_BFN_CUDA_OFFSETS(p, e, off)                                                             \
    int64_t off[DC_BFN_NIN_];                                                                      \
    {                                                                                              \
        for (int j = 0; j < DC_BFN_NIN_; ++j)                                                      \
            off[j] = 0;                                                                            \
        int64_t rest = (e);                                                                        \
        for (int d = (p).ndim - 1; d >= 0; --d) {                                                  \
            const int64_t c = rest % (p).shape[d];                                                 \
            rest /= (p).shape[d];                                                                  \
            for (int j = 0; j < DC_BFN_NIN_; ++j)                                                  \
                off[j] += c * (p).in_strides[j][d];                                                \
        }                                                                                          \
    }

/* Kernel parameters sized for this function, copied from the launch. */
#define DC_BFN_CUDA_PARAMS(n_out_arrays)                                                           \
    struct params {                                                                                \
        int64_t numel;                                                                             \
        int ndim;                                                                                  \
        int64_t shape[DC_BFN_MAX_DIMS];                                                            \
        const dc_real *in[DC_BFN_NIN_];                                                            \
        int64_t in_strides[DC_BFN_NIN_][DC_BFN_MAX_DIMS];                                          \
        const dc_real *adj[DC_BFN_NOUT_];                                                          \
        dc_real *out[n_out_arrays];                                                                \
    };                                                                                             \
    static params make_params(const dc_bfn_cuda_launch *L)                                         \
    {                                                                                              \
        params p;                                                                                  \
        p.numel = L->numel;                                                                        \
        p.ndim = L->ndim;                                                                          \
        for (int d = 0; d < DC_BFN_MAX_DIMS; ++d)                                                  \
            p.shape[d] = L->shape[d];                                                              \
        for (int j = 0; j < DC_BFN_NIN_; ++j) {                                                    \
            p.in[j] = (const dc_real *)L->in[j];                                                   \
            for (int d = 0; d < DC_BFN_MAX_DIMS; ++d)                                              \
                p.in_strides[j][d] = L->in_strides[j][d];                                          \
        }                                                                                          \
        for (int k = 0; k < DC_BFN_NOUT_; ++k)                                                     \
            p.adj[k] = (const dc_real *)L->adj[k];                                                 \
        for (int a = 0; a < (n_out_arrays); ++a)                                                   \
            p.out[a] = (dc_real *)L->out[a];                                                       \
        return p;                                                                                  \
    }                                                                                              \
    static int launch(const dc_bfn_cuda_launch *L, void (*kernel)(params))                         \
    {                                                                                              \
        if (L->numel == 0)                                                                         \
            return 0;                                                                              \
        const int block = L->block > 0 ? L->block : 256;                                           \
        int64_t blocks = (L->numel + block - 1) / block;                                           \
        if (L->max_blocks > 0 && blocks > L->max_blocks)                                           \
            blocks = L->max_blocks;                                                                \
        kernel<<<(unsigned)blocks, block, 0, (cudaStream_t)L->stream>>>(make_params(L));           \
        return (int)cudaGetLastError();                                                            \
    }

#define DC_BFN_CUDA_LOOP(p, e)                                                                     \
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < (p).numel;                \
         e += (int64_t)gridDim.x * blockDim.x)

#define DC_BFN_CUDA_LOAD(p, e, x)                                                                  \
    DC_BFN_CUDA_OFFSETS(p, e, off)                                                                 \
    dc_real x[DC_BFN_NIN_];                                                                        \
    for (int j = 0; j < DC_BFN_NIN_; ++j)                                                          \
        x[j] = (p).in[j][off[j]];

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
