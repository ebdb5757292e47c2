/* The binary interface between dualcast and the broadcast functions that a
 * build instantiates from user source (cmake/DualcastBroadcastFn.cmake).
 * Users never fill these structures by hand: they declare a function with
 * DC_BFN_DECLARE(name) and pass DC_BFN_REF(name) to dc_broadcast(). */
#ifndef DUALCAST_BFN_ABI_H
#define DUALCAST_BFN_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever the layout below changes; dc_broadcast() refuses a
 * function compiled against another version. */
#define DC_BFN_ABI_VERSION 3

#define DC_BFN_MAX_INPUTS 24  /* inputs of one function, control included */
#define DC_BFN_MAX_OUTPUTS 8  /* outputs of one function */
#define DC_BFN_MAX_ARRAYS 128 /* outputs * (1 + differentiable inputs) */
#define DC_BFN_MAX_DIMS 8     /* same as DC_MAX_DIMS */

/* A CPU chunk kernel: n elements, every pointer contiguous over the chunk.
 *   primal:  in = inputs;             out = outputs
 *   dual:    in = inputs;             out = outputs, then partial (k, j) at
 *                                           n_outputs + k * n_wrt + j
 *   adjoint: in = inputs, adjoints;   out = one gradient contribution per
 *                                           differentiable input:
 *                                           sum over k of adj_k * partial (k, j)
 * The [DC_BFN_UNIFORM] variant takes the chunk as rows of *(const int64_t *)arg
 * elements (the whole chunk when arg is NULL) and each control input as one
 * value per row, constant over its row. */
typedef void (*dc_bfn_cpu_kernel)(int64_t n, const void *const *in, void *const *out, const void *arg);

enum { DC_BFN_VARYING = 0, DC_BFN_UNIFORM = 1 };

typedef struct dc_bfn_cpu_kernels {
    dc_bfn_cpu_kernel primal[2];
    dc_bfn_cpu_kernel dual[2];
    dc_bfn_cpu_kernel adjoint[2];
} dc_bfn_cpu_kernels;

/* One CUDA launch over a broadcast of the inputs to `shape`: inputs are read
 * through their strides (0 along broadcast dimensions); every partial and
 * adjoint array, and every output of the primal and dual launches, is
 * contiguous in `shape`. Array order as for the CPU kernels; `adj` holds the
 * adjoints of the adjoint launch.
 *
 * The adjoint launch writes each gradient contribution out[j] in place:
 * through out_strides[j] (its strides in `shape`, in elements: a slice or a
 * transposed view of a gradient, never two elements at one place), adding to
 * what it holds when bit j of out_add is set (a gradient that accumulates).
 * The other launches ignore both. */
typedef struct dc_bfn_cuda_launch {
    int64_t numel;
    int32_t ndim;
    int32_t max_blocks;  /* grid size cap, from the device's properties */
    int32_t block;       /* threads per block */
    int32_t pad_;
    int64_t shape[DC_BFN_MAX_DIMS];
    const void *in[DC_BFN_MAX_INPUTS];
    int64_t in_strides[DC_BFN_MAX_INPUTS][DC_BFN_MAX_DIMS];
    const void *adj[DC_BFN_MAX_OUTPUTS];
    void *out[DC_BFN_MAX_ARRAYS];
    void *stream; /* cudaStream_t */
    int64_t out_strides[DC_BFN_MAX_INPUTS][DC_BFN_MAX_DIMS]; /* adjoint launch */
    uint32_t out_add;                                         /* adjoint launch: bit j adds to out[j] */
    uint32_t pad2_;
} dc_bfn_cuda_launch;

/* Returns a cudaError_t (0 on success). */
typedef int (*dc_bfn_cuda_launcher)(const dc_bfn_cuda_launch *launch);

typedef struct dc_bfn_cuda_kernels {
    dc_bfn_cuda_launcher primal;
    dc_bfn_cuda_launcher dual;
    dc_bfn_cuda_launcher adjoint;
} dc_bfn_cuda_kernels;

enum { DC_BFN_F32 = 0, DC_BFN_F64 = 1 };

/* What the build registers for one broadcast function. */
typedef struct dc_bfn {
    int abi_version;
    const char *name;
    int n_inputs;
    int n_outputs;
    int n_wrt;                        /* differentiable inputs */
    const unsigned char *is_wrt;      /* n_inputs flags */
    const char *const *input_names;   /* n_inputs */
    const char *const *output_names;  /* n_outputs */
    dc_bfn_cpu_kernels cpu[2];        /* [DC_BFN_F32], [DC_BFN_F64] */
    const dc_bfn_cuda_kernels *cuda;  /* [2] by dtype, or NULL when built without CUDA */
} dc_bfn;

/* Declares the function registered as `name` (the first argument of its
 * DC_BFN). Refer to it as DC_BFN_REF(name). */
#define DC_BFN_DECLARE(name) extern const dc_bfn dc_bfn_##name
#define DC_BFN_REF(name) (&dc_bfn_##name)

#ifdef __cplusplus
}
#endif

#endif /* DUALCAST_BFN_ABI_H */
