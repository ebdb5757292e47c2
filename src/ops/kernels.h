/* The elementwise kernels of the primitive ops, named by id so that each
 * backend supplies its own implementation of the same list. Arrays are in
 * the order given; "g" is the adjoint of the op's output. */
#ifndef DC_OPS_KERNELS_H
#define DC_OPS_KERNELS_H

#include "../../broadcast/loop.h"

typedef enum dc_kernel_id {
    DC_K_COPY,        /* x -> x */
    DC_K_AFFINE,      /* x -> x * s + t          (dc_affine_arg) */
    DC_K_ADD,         /* a, b -> a + b */
    DC_K_SUB,
    DC_K_MUL,
    DC_K_DIV,
    DC_K_POW,
    DC_K_NEG,
    DC_K_EXP,
    DC_K_LOG,
    DC_K_TANH,
    DC_K_SIGMOID,
    DC_K_RELU,
    DC_K_HARD_SIGMOID, /* x -> hard_sigmoid(x, s)  (dc_affine_arg: s is the slope) */
    DC_K_STEP,        /* x -> x > s ? 1 : 0       (dc_affine_arg: s is the threshold) */
    DC_K_SELECT,      /* c, a, b -> c != 0 ? a : b */
    DC_K_ADD_BWD,     /* g -> ga, gb */
    DC_K_SUB_BWD,     /* g -> ga, gb */
    DC_K_MUL_BWD,     /* g, a, b -> ga, gb */
    DC_K_DIV_BWD,     /* g, b, y -> ga, gb */
    DC_K_POW_BWD,     /* g, a, b, y -> ga, gb */
    DC_K_EXP_BWD,     /* g, y -> gx */
    DC_K_LOG_BWD,     /* g, x -> gx */
    DC_K_TANH_BWD,    /* g, y -> gx */
    DC_K_SIGMOID_BWD, /* g, y -> gx */
    DC_K_RELU_BWD,    /* g, x -> gx */
    DC_K_HARD_SIGMOID_BWD, /* g, x -> gx  (dc_affine_arg: slope) */
    DC_K_SELECT_BWD,  /* g, c -> ga, gb */
    DC_K_PARTIALS_BWD, /* g_0..g_{m-1}, P_(0,0)..P_(m-1,D-1) -> gx_0..gx_{D-1}  (dc_partials_arg) */
    DC_K_COUNT
} dc_kernel_id;

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

#endif /* DC_OPS_KERNELS_H */
