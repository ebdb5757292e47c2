#include "backward.h"

const dc_op_info dc_op_table[DC_OP_COUNT] = {
    [DC_OP_ADD] = {"add", dc_elementwise_backward},
    [DC_OP_SUB] = {"sub", dc_elementwise_backward},
    [DC_OP_MUL] = {"mul", dc_elementwise_backward},
    [DC_OP_DIV] = {"div", dc_elementwise_backward},
    [DC_OP_POW] = {"pow", dc_elementwise_backward},
    [DC_OP_AFFINE] = {"affine", dc_elementwise_backward},
    [DC_OP_NEG] = {"neg", dc_elementwise_backward},
    [DC_OP_EXP] = {"exp", dc_elementwise_backward},
    [DC_OP_LOG] = {"log", dc_elementwise_backward},
    [DC_OP_TANH] = {"tanh", dc_elementwise_backward},
    [DC_OP_SIGMOID] = {"sigmoid", dc_elementwise_backward},
    [DC_OP_RELU] = {"relu", dc_elementwise_backward},
    [DC_OP_HARD_SIGMOID] = {"hard_sigmoid", dc_elementwise_backward},
    [DC_OP_STEP] = {"step", dc_elementwise_backward},
    [DC_OP_SELECT] = {"select", dc_elementwise_backward},
    [DC_OP_SUM] = {"sum", dc_sum_backward},
    [DC_OP_MATMUL] = {"matmul", dc_matmul_backward},
    [DC_OP_TRANSPOSE] = {"transpose", dc_transpose_backward},
    [DC_OP_RESHAPE] = {"reshape", dc_reshape_backward},
    [DC_OP_SLICE] = {"slice", dc_slice_backward},
    [DC_OP_CONCAT] = {"concat", dc_concat_backward},
    [DC_OP_EMBEDDING] = {"embedding", dc_embedding_backward},
    [DC_OP_CROSS_ENTROPY] = {"cross_entropy", dc_cross_entropy_backward},
    [DC_OP_BROADCAST_FN] = {"broadcast_fn", dc_broadcast_fn_backward},
};
_Static_assert(sizeof dc_op_table / sizeof dc_op_table[0] == DC_OP_COUNT, "every op needs a table row");
