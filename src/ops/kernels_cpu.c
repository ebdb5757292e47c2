#include "kernels.h"

#include "../../broadcast/pp.h"
#include "../../dual/scalar_math.h"

#define KS float
#define KSFX f32
#include "kernels_impl.h"
#undef KS
#undef KSFX

#define KS double
#define KSFX f64
#include "kernels_impl.h"
#undef KS
#undef KSFX

static const char *const kernel_names[] = {
    [DC_K_COPY] = "copy",
    [DC_K_AFFINE] = "affine",
    [DC_K_ADD] = "add",
    [DC_K_SUB] = "sub",
    [DC_K_MUL] = "mul",
    [DC_K_DIV] = "div",
    [DC_K_POW] = "pow",
    [DC_K_NEG] = "neg",
    [DC_K_EXP] = "exp",
    [DC_K_LOG] = "log",
    [DC_K_TANH] = "tanh",
    [DC_K_SIGMOID] = "sigmoid",
    [DC_K_RELU] = "relu",
    [DC_K_HARD_SIGMOID] = "hard_sigmoid",
    [DC_K_STEP] = "step",
    [DC_K_SELECT] = "select",
    [DC_K_ADD_BWD] = "add_bwd",
    [DC_K_SUB_BWD] = "sub_bwd",
    [DC_K_MUL_BWD] = "mul_bwd",
    [DC_K_DIV_BWD] = "div_bwd",
    [DC_K_POW_BWD] = "pow_bwd",
    [DC_K_EXP_BWD] = "exp_bwd",
    [DC_K_LOG_BWD] = "log_bwd",
    [DC_K_TANH_BWD] = "tanh_bwd",
    [DC_K_SIGMOID_BWD] = "sigmoid_bwd",
    [DC_K_RELU_BWD] = "relu_bwd",
    [DC_K_HARD_SIGMOID_BWD] = "hard_sigmoid_bwd",
    [DC_K_SELECT_BWD] = "select_bwd",
    [DC_K_PARTIALS_BWD] = "partials_bwd",
};
_Static_assert(sizeof kernel_names / sizeof kernel_names[0] == DC_K_COUNT, "every kernel needs a name");

dc_chunk_fn dc_cpu_kernel(dc_kernel_id id, dc_dtype dtype)
{
    return dtype == DC_F64 ? kernel_table_f64[id] : kernel_table_f32[id];
}

const char *dc_kernel_name(dc_kernel_id id) { return (id >= 0 && id < DC_K_COUNT) ? kernel_names[id] : "?"; }
