/* The elementwise kernels of the primitive ops, named by id so that each
 * backend supplies the same list. One X-macro row per kernel: its id, the
 * formula in kernel_formulas.h, and how many arrays it reads and writes.
 * "g" is the adjoint of the op's output; the scalar argument (a scale,
 * slope or threshold) travels in dc_affine_arg. */
#ifndef DC_ENGINE_KERNELS_H
#define DC_ENGINE_KERNELS_H

#include "loop.h"

#define DC_KERNEL_LIST(X)                                                                          \
    X(COPY, copy, 1, 1)                 /* x -> x */                                                \
    X(AFFINE, affine, 1, 1)             /* x -> x * s + t */                                        \
    X(ADD, add, 2, 1)                                                                              \
    X(SUB, sub, 2, 1)                                                                              \
    X(MUL, mul, 2, 1)                                                                              \
    X(DIV, div, 2, 1)                                                                              \
    X(POW, pow, 2, 1)                                                                              \
    X(NEG, neg, 1, 1)                                                                              \
    X(EXP, exp, 1, 1)                                                                              \
    X(LOG, log, 1, 1)                                                                              \
    X(TANH, tanh, 1, 1)                                                                            \
    X(SIGMOID, sigmoid, 1, 1)                                                                      \
    X(RELU, relu, 1, 1)                                                                            \
    X(HARD_SIGMOID, hard_sigmoid, 1, 1) /* slope s */                                               \
    X(STEP, step, 1, 1)                 /* threshold s */                                           \
    X(SELECT, select, 3, 1)             /* c, a, b -> c != 0 ? a : b */                             \
    X(ADD_BWD, add_bwd, 1, 2)           /* g -> ga, gb */                                           \
    X(SUB_BWD, sub_bwd, 1, 2)           /* g -> ga, gb */                                           \
    X(MUL_BWD, mul_bwd, 3, 2)           /* g, a, b -> ga, gb */                                     \
    X(DIV_BWD, div_bwd, 3, 2)           /* g, b, y -> ga, gb */                                     \
    X(POW_BWD, pow_bwd, 4, 2)           /* g, a, b, y -> ga, gb */                                  \
    X(EXP_BWD, exp_bwd, 2, 1)           /* g, y -> gx */                                            \
    X(LOG_BWD, log_bwd, 2, 1)           /* g, x -> gx */                                            \
    X(TANH_BWD, tanh_bwd, 2, 1)         /* g, y -> gx */                                            \
    X(SIGMOID_BWD, sigmoid_bwd, 2, 1)   /* g, y -> gx */                                            \
    X(RELU_BWD, relu_bwd, 2, 1)         /* g, x -> gx */                                            \
    X(HARD_SIGMOID_BWD, hard_sigmoid_bwd, 2, 1) /* g, x -> gx; slope s */                           \
    X(SELECT_BWD, select_bwd, 2, 2)     /* g, c -> ga, gb */

#define DC_KERNEL_ENUM(ID, name, n_in, n_out) DC_K_##ID,
typedef enum dc_kernel_id {
    DC_KERNEL_LIST(DC_KERNEL_ENUM)
    /* g_0..g_{m-1}, P_(0,0)..P_(m-1,D-1) -> gx_0..gx_{D-1}: the store policy's
     * backward of a broadcast node, with dc_partials_arg */
    DC_K_PARTIALS_BWD,
    DC_K_COUNT
} dc_kernel_id;
#undef DC_KERNEL_ENUM

/* The largest number of arrays a listed kernel reads and writes. */
#define DC_KERNEL_MAX_IN 4
#define DC_KERNEL_MAX_OUT 2

typedef struct dc_affine_arg {
    double s, t;
} dc_affine_arg;

typedef struct dc_partials_arg {
    int n_out; /* m */
    int n_wrt; /* D */
} dc_partials_arg;

/* The CPU implementation of a kernel for a dtype. */
dc_chunk_fn dc_cpu_kernel(dc_kernel_id id, dc_dtype dtype);

/* A name for messages and profiles. */
const char *dc_kernel_name(dc_kernel_id id);

/* Runs kernel `id` over `shape` on the context's backend: the CPU loop
 * engine (loop_cpu.c) or the CUDA loops (src/cuda/elementwise.cu). */
dc_status dc_run_kernel(dc_ctx *ctx, dc_kernel_id id, const void *arg, dc_dtype dtype, int ndim,
                        const int64_t *shape, int n_in, const dc_loop_in *in, int n_out, const dc_loop_out *out);

#endif /* DC_ENGINE_KERNELS_H */
