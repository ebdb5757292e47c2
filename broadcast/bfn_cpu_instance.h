/* Instantiates one broadcast function for the CPU in one scalar type, as
 * primal kernels or as dual and adjoint kernels. A generated translation unit
 * defines, then includes this file:
 *
 *   DC_BFN_NAME              the function's name (must match its DC_BFN)
 *   DC_BFN_FILE              the body's file, as a string
 *   DC_BFN_BITS              32 or 64
 *   DC_BFN_DUAL_MODE         0: primal kernels; 1: dual and adjoint kernels
 *   DC_BFN_INSTANCE_VARYING  0: the uniform kernels (control values constant
 *                            along a row); 1: the varying ones (any control)
 *   DC_BFN_DESCRIPTOR        (optional) also define the dc_bfn descriptor
 *   DC_BFN_WITH_CUDA         (optional) the descriptor points at CUDA launchers
 *
 * Every kernel is one loop over contiguous elements. Built with
 * -fno-trapping-math, gcc if-converts the body's branches and vectorizes the
 * loop; in the uniform variants the control inputs are loop invariants, so gcc
 * instead unswitches the loop on them (a copy per path, each vectorized) and
 * only the branch taken is computed. See cmake/DualcastBroadcastFn.cmake for
 * the flags.
 *
 * The two variants live in separate translation units because they want the
 * math compiled differently: in the varying kernels the math chooses values
 * with bit operations instead of conditionals, so that what two branches of
 * the body share is computed once (see dc_select_f32 in dual/math_f32.h);
 * the uniform kernels keep the conditionals, which cost one blend each.
 *
 * Which unit includes which header, in which pass and with which macros, on
 * the CPU and on CUDA: broadcast/README.md. */

#if !defined(DC_BFN_INSTANCE_VARYING) || (DC_BFN_INSTANCE_VARYING != 0 && DC_BFN_INSTANCE_VARYING != 1)
#error "DC_BFN_INSTANCE_VARYING must be 0 or 1"
#endif
#if DC_BFN_INSTANCE_VARYING
#define DC_SELECT_BITWISE 1
#endif

#include <stdint.h>

#include "../dual/scalar_math.h"
#include "bfn_macros.h"
#include <dualcast/bfn_abi.h>

#if DC_BFN_BITS == 32
#define DC_S float
#define DC_SFX f32
#elif DC_BFN_BITS == 64
#define DC_S double
#define DC_SFX f64
#else
#error "DC_BFN_BITS must be 32 or 64"
#endif

#if defined(__clang__)
/* A body clang cannot vectorize (a libm call in float64, a branch it does
 * not if-convert) stays a scalar loop: no warning that the request failed
 * (-Wpass-failed, turned off below for this unit's kernels). */
#pragma clang diagnostic ignored "-Wpass-failed"
#define DC_BFN_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define DC_BFN_IVDEP _Pragma("GCC ivdep")
#else
#define DC_BFN_IVDEP
#endif

#define DC_BFN_KERNEL(kind) DC_PP_CAT(DC_PP_CAT(DC_PP_CAT(dc_bfnk_, DC_BFN_NAME), DC_PP_CAT(_, DC_SFX)), kind)
#define DC_BFN_NIN DC_BFN_ID(dc_bfn_nin)
#define DC_BFN_NOUT DC_BFN_ID(dc_bfn_nout)
#define DC_BFN_NWRT DC_BFN_ID(dc_bfn_nwrt)
#define DC_BFN_IS_WRT_AT(j) DC_BFN_ID(dc_bfn_is_wrt)[j]

/* Loads element e of every input into x; with uniform control the control
 * inputs come from `uniform` instead, read once per row. */
#define DC_BFN_LOAD_INPUTS(x, in, e, uniform, use_uniform)                                         \
    DC_UNROLL for (int j = 0; j < DC_BFN_NIN; ++j)                                                 \
        x[j] = ((use_uniform) && !DC_BFN_IS_WRT_AT(j)) ? uniform[j] : in[j][e];

#define DC_BFN_SETUP(n_in, n_out)                                                                  \
    (void)arg;                                                                                     \
    const dc_real *in[(n_in)];                                                                     \
    dc_real *out[(n_out)];                                                                         \
    for (int j = 0; j < (n_in); ++j)                                                               \
        in[j] = (const dc_real *)in_[j];                                                           \
    for (int j = 0; j < (n_out); ++j)                                                              \
        out[j] = (dc_real *)out_[j];

/* One element: load the inputs, run the body, then `store` what this kind of
 * kernel keeps of the outputs o. */
#define DC_BFN_ELEMENT(e, uniform, use_uniform, store)                                             \
    {                                                                                              \
        dc_real x[DC_BFN_NIN];                                                                     \
        DC_BFN_LOAD_INPUTS(x, in, e, uniform, use_uniform)                                         \
        dc_var o[DC_BFN_NOUT];                                                                     \
        DC_BFN_ID(dc_bfn_body)(x, o);                                                              \
        store(e, o)                                                                                \
    }

/* The varying kernels compute every branch of the body: heavy enough that
 * the hardware prefetcher falls behind on arrays larger than the caches.
 * They run in blocks of DC_BFN_BLOCK elements and ask for each streamed
 * input (differentiable inputs, adjoints) DC_BFN_PREFETCH_BYTES ahead,
 * which speeds up the c-update's primal kernel with control per column on
 * arrays beyond the caches. The uniform kernels (lighter, memory-bound
 * loops) measured slower with the same prefetch, so those run without it
 * (figures: bench/RESULTS.md, section "Measurements behind design choices
 * in the code"). A prefetch past the end of an array is harmless: it never
 * faults. */
#define DC_BFN_BLOCK 64
#define DC_BFN_PREFETCH_BYTES 512
#define DC_BFN_PREFETCH_INPUTS(n_in_arrays, e0)                                                    \
    DC_UNROLL for (int j = 0; j < (n_in_arrays); ++j) if (j >= DC_BFN_NIN || DC_BFN_IS_WRT_AT(j))  \
    {                                                                                              \
        const uintptr_t ahead = (uintptr_t)&in[j][e0] + DC_BFN_PREFETCH_BYTES;                     \
        DC_UNROLL for (int b = 0; b < (int)(DC_BFN_BLOCK * sizeof(dc_real)); b += 64)              \
            __builtin_prefetch((const void *)(ahead + (uintptr_t)b));                              \
    }

/* Every kernel: one DC_BFN_ELEMENT per element. The uniform variant walks
 * the chunk row by row (arg points at the row length) with each control
 * input holding one value per row: within a row the control values are loop
 * invariants. */
#define DC_BFN_LOOP_KERNEL(kind, use_uniform, n_in_arrays, n_out_arrays, store)                    \
    void DC_BFN_KERNEL(kind)(int64_t n, const void *const *in_, void *const *out_, const void *arg) \
    {                                                                                              \
        DC_BFN_SETUP(n_in_arrays, n_out_arrays)                                                    \
        const int64_t row_len = ((use_uniform) && arg) ? *(const int64_t *)arg : n;                \
        for (int64_t r0 = 0, row = 0; r0 < n; r0 += row_len, ++row) {                              \
            dc_real uniform[DC_BFN_NIN];                                                           \
            DC_UNROLL for (int j = 0; j < DC_BFN_NIN; ++j)                                         \
                uniform[j] = ((use_uniform) && !DC_BFN_IS_WRT_AT(j)) ? in[j][row] : (dc_real)0;    \
            const int64_t r1 = n - r0 < row_len ? n : r0 + row_len;                                \
            int64_t e0 = r0;                                                                       \
            if (!(use_uniform)) {                                                                  \
                for (; e0 + DC_BFN_BLOCK <= r1; e0 += DC_BFN_BLOCK) {                              \
                    DC_BFN_PREFETCH_INPUTS(n_in_arrays, e0)                                        \
                    DC_BFN_IVDEP                                                                   \
                    for (int64_t e = e0; e < e0 + DC_BFN_BLOCK; ++e)                               \
                        DC_BFN_ELEMENT(e, uniform, use_uniform, store)                             \
                }                                                                                  \
            }                                                                                      \
            DC_BFN_IVDEP                                                                           \
            for (int64_t e = e0; e < r1; ++e)                                                      \
                DC_BFN_ELEMENT(e, uniform, use_uniform, store)                                     \
        }                                                                                          \
    }

#if !DC_BFN_DUAL_MODE

#define DC_BFN_PASS _primal
#include "bfn_dsl_primal.h"
#include DC_BFN_FILE

/* the outputs' values */
#define DC_BFN_STORE_PRIMAL(e, o)                                                                  \
    DC_UNROLL for (int k = 0; k < DC_BFN_NOUT; ++k) out[k][e] = o[k];
#define DC_BFN_PRIMAL_KERNEL(kind, use_uniform)                                                    \
    DC_BFN_LOOP_KERNEL(kind, use_uniform, DC_BFN_NIN, DC_BFN_NOUT, DC_BFN_STORE_PRIMAL)

#if DC_BFN_INSTANCE_VARYING
void DC_BFN_KERNEL(_primal_varying)(int64_t n, const void *const *in_, void *const *out_, const void *arg);
DC_BFN_PRIMAL_KERNEL(_primal_varying, 0)
#else
void DC_BFN_KERNEL(_primal_uniform)(int64_t n, const void *const *in_, void *const *out_, const void *arg);
DC_BFN_PRIMAL_KERNEL(_primal_uniform, 1)
#endif

#else /* DC_BFN_DUAL_MODE */

#include "bfn_dual_begin.h"

/* values, then partial (k, j) at DC_BFN_NOUT + k * DC_BFN_NWRT + j */
#define DC_BFN_STORE_DUAL(e, o)                                                                    \
    DC_UNROLL for (int k = 0; k < DC_BFN_NOUT; ++k)                                                \
    {                                                                                              \
        out[k][e] = o[k].v;                                                                        \
        DC_UNROLL for (int j = 0; j < DC_BFN_NWRT; ++j)                                            \
            out[DC_BFN_NOUT + k * DC_BFN_NWRT + j][e] = o[k].d[j];                                 \
    }
#define DC_BFN_DUAL_KERNEL(kind, use_uniform)                                                      \
    DC_BFN_LOOP_KERNEL(kind, use_uniform, DC_BFN_NIN, DC_BFN_NOUT * (1 + DC_BFN_NWRT), DC_BFN_STORE_DUAL)

/* Recompute policy: the duals again, times the output adjoints (read after
 * the inputs), summed over outputs: one contribution per differentiable input.
 * A partial that is zero by construction adds nothing, whatever the adjoint. */
#define DC_BFN_ADJ_TERM(adj, partial) (DC_KNOWN_ZERO(partial) ? (partial) : DC_BFN_P_(adj_mul)(adj, partial))
#define DC_BFN_STORE_ADJOINT(e, o)                                                                 \
    DC_UNROLL for (int j = 0; j < DC_BFN_NWRT; ++j)                                                \
    {                                                                                              \
        dc_real g = DC_BFN_ADJ_TERM(in[DC_BFN_NIN][e], o[0].d[j]);                                  \
        DC_UNROLL for (int k = 1; k < DC_BFN_NOUT; ++k)                                            \
        {                                                                                          \
            const dc_real t = DC_BFN_ADJ_TERM(in[DC_BFN_NIN + k][e], o[k].d[j]);                   \
            g = DC_TADD(g, t);                                                                     \
        }                                                                                          \
        out[j][e] = g;                                                                             \
    }
#define DC_BFN_ADJOINT_KERNEL(kind, use_uniform)                                                   \
    DC_BFN_LOOP_KERNEL(kind, use_uniform, DC_BFN_NIN + DC_BFN_NOUT, DC_BFN_NWRT, DC_BFN_STORE_ADJOINT)

#if DC_BFN_INSTANCE_VARYING
void DC_BFN_KERNEL(_dual_varying)(int64_t n, const void *const *in_, void *const *out_, const void *arg);
void DC_BFN_KERNEL(_adjoint_varying)(int64_t n, const void *const *in_, void *const *out_, const void *arg);
DC_BFN_DUAL_KERNEL(_dual_varying, 0)
DC_BFN_ADJOINT_KERNEL(_adjoint_varying, 0)
#else
void DC_BFN_KERNEL(_dual_uniform)(int64_t n, const void *const *in_, void *const *out_, const void *arg);
void DC_BFN_KERNEL(_adjoint_uniform)(int64_t n, const void *const *in_, void *const *out_, const void *arg);
DC_BFN_DUAL_KERNEL(_dual_uniform, 1)
DC_BFN_ADJOINT_KERNEL(_adjoint_uniform, 1)
#endif

#endif /* DC_BFN_DUAL_MODE */

#if defined(DC_BFN_DESCRIPTOR)

#define DC_BFN_KERNEL_T(t, kind) DC_PP_CAT(DC_PP_CAT(DC_PP_CAT(dc_bfnk_, DC_BFN_NAME), t), kind)
#define DC_BFN_DECLARE_KERNELS(t)                                                                  \
    void DC_BFN_KERNEL_T(t, _primal_varying)(int64_t, const void *const *, void *const *, const void *); \
    void DC_BFN_KERNEL_T(t, _primal_uniform)(int64_t, const void *const *, void *const *, const void *); \
    void DC_BFN_KERNEL_T(t, _dual_varying)(int64_t, const void *const *, void *const *, const void *);   \
    void DC_BFN_KERNEL_T(t, _dual_uniform)(int64_t, const void *const *, void *const *, const void *);   \
    void DC_BFN_KERNEL_T(t, _adjoint_varying)(int64_t, const void *const *, void *const *, const void *); \
    void DC_BFN_KERNEL_T(t, _adjoint_uniform)(int64_t, const void *const *, void *const *, const void *);
#define DC_BFN_KERNEL_TABLE(t)                                                                     \
    {{DC_BFN_KERNEL_T(t, _primal_varying), DC_BFN_KERNEL_T(t, _primal_uniform)},                   \
     {DC_BFN_KERNEL_T(t, _dual_varying), DC_BFN_KERNEL_T(t, _dual_uniform)},                       \
     {DC_BFN_KERNEL_T(t, _adjoint_varying), DC_BFN_KERNEL_T(t, _adjoint_uniform)}}

DC_BFN_DECLARE_KERNELS(_f32)
DC_BFN_DECLARE_KERNELS(_f64)

#if defined(DC_BFN_WITH_CUDA)
extern const dc_bfn_cuda_kernels DC_PP_CAT(dc_bfn_cuda_, DC_BFN_NAME)[2];
#define DC_BFN_CUDA_TABLE DC_PP_CAT(dc_bfn_cuda_, DC_BFN_NAME)
#else
#define DC_BFN_CUDA_TABLE 0
#endif

DC_STATIC_ASSERT(DC_BFN_NIN <= DC_BFN_MAX_INPUTS, "too many inputs for one broadcast function");
DC_STATIC_ASSERT(DC_BFN_NOUT <= DC_BFN_MAX_OUTPUTS, "too many outputs for one broadcast function");
DC_STATIC_ASSERT(DC_BFN_NOUT * (1 + DC_BFN_NWRT) <= DC_BFN_MAX_ARRAYS,
                 "outputs x differentiable inputs exceeds DC_BFN_MAX_ARRAYS");

extern const dc_bfn DC_PP_CAT(dc_bfn_, DC_BFN_NAME);
const dc_bfn DC_PP_CAT(dc_bfn_, DC_BFN_NAME) = {
    DC_BFN_ABI_VERSION,
    DC_PP_STR(DC_BFN_NAME),
    DC_BFN_NIN,
    DC_BFN_NOUT,
    DC_BFN_NWRT,
    DC_BFN_ID(dc_bfn_is_wrt),
    DC_BFN_ID(dc_bfn_input_names),
    DC_BFN_ID(dc_bfn_output_names),
    {DC_BFN_KERNEL_TABLE(_f32), DC_BFN_KERNEL_TABLE(_f64)},
    DC_BFN_CUDA_TABLE,
};

#endif /* DC_BFN_DESCRIPTOR */
