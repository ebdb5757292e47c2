/* Every op the tape records, one row each: the list the op enum, the op
 * table (name and adjoint, src/ops/op_table.c) and the elementwise ops'
 * rows (src/ops/elementwise.c) are expanded from. Adding an op is one row
 * here, its formula and its adjoint.
 *
 * EW(ID, name, n_in, forward, backward, reads, n_targets, target0, target1)
 * is an elementwise op run by engine kernels (src/engine/kernels.h): the
 * kernel DC_K_<forward> computes it, and its adjoint is kernel
 * DC_K_<backward> reading the arrays named in `reads` ('g' the output's
 * adjoint, 'y' the output, '0' to '2' the inputs), whose outputs are added
 * into the gradients of inputs target0 (and target1). The public function is
 * dc_op_<name>.
 *
 * OP(ID, name, backward) is any other op, with its adjoint function. */
#ifndef DC_OPS_OP_LIST_H
#define DC_OPS_OP_LIST_H

#define DC_OP_LIST(EW, OP)                                                                         \
    EW(ADD, add, 2, ADD, ADD_BWD, "g", 2, 0, 1)                                                    \
    EW(SUB, sub, 2, SUB, SUB_BWD, "g", 2, 0, 1)                                                    \
    EW(MUL, mul, 2, MUL, MUL_BWD, "g01", 2, 0, 1)                                                  \
    EW(DIV, div, 2, DIV, DIV_BWD, "g1y", 2, 0, 1)                                                  \
    EW(POW, pow, 2, POW, POW_BWD, "g01y", 2, 0, 1)                                                 \
    EW(AFFINE, affine, 1, AFFINE, AFFINE, "g", 1, 0, 0) /* adjoint: g * s */                       \
    EW(NEG, neg, 1, NEG, NEG, "g", 1, 0, 0)                                                        \
    EW(EXP, exp, 1, EXP, EXP_BWD, "gy", 1, 0, 0)                                                   \
    EW(LOG, log, 1, LOG, LOG_BWD, "g0", 1, 0, 0)                                                   \
    EW(TANH, tanh, 1, TANH, TANH_BWD, "gy", 1, 0, 0)                                               \
    EW(SIGMOID, sigmoid, 1, SIGMOID, SIGMOID_BWD, "gy", 1, 0, 0)                                   \
    EW(RELU, relu, 1, RELU, RELU_BWD, "g0", 1, 0, 0)                                               \
    EW(HARD_SIGMOID, hard_sigmoid, 1, HARD_SIGMOID, HARD_SIGMOID_BWD, "g0", 1, 0, 0)               \
    /* straight-through: the step's adjoint passes the gradient unchanged */                       \
    EW(STEP_ST, step_st, 1, STEP, COPY, "g", 1, 0, 0)                                              \
    EW(SELECT, select, 3, SELECT, SELECT_BWD, "g0", 2, 1, 2)                                       \
    OP(SUM, sum, dc_sum_backward)                                                                  \
    OP(MATMUL, matmul, dc_matmul_backward)                                                         \
    OP(TRANSPOSE, transpose, dc_transpose_backward)                                                \
    OP(RESHAPE, reshape, dc_reshape_backward)                                                      \
    OP(SLICE, slice, dc_slice_backward)                                                            \
    OP(CONCAT, concat, dc_concat_backward)                                                         \
    OP(EMBEDDING, embedding, dc_embedding_backward)                                                \
    OP(CROSS_ENTROPY, cross_entropy, dc_cross_entropy_backward)                                    \
    OP(BROADCAST_FN, broadcast_fn, dc_broadcast_fn_backward)                                       \
    OP(SCAN, scan, dc_scan_backward)                                                               \
    OP(SPMM, spmm, dc_spmm_backward)                                                               \
    OP(SDDMM, sddmm, dc_sddmm_backward)                                                            \
    OP(CSR_SUM, csr_sum, dc_csr_sum_backward)                                                      \
    OP(CSR_EXPAND, csr_expand, dc_csr_expand_backward)                                             \
    OP(CSR_TO_DENSE, csr_to_dense, dc_csr_to_dense_backward)                                       \
    OP(CSR_SAMPLE, csr_sample, dc_csr_sample_backward)                                             \
    OP(CSR_PERMUTE, csr_permute, dc_csr_permute_backward)                                          \
    OP(PROD, prod, dc_reduce_backward)                                                             \
    OP(MAX, max, dc_reduce_backward)                                                               \
    OP(MIN, min, dc_reduce_backward)                                                               \
    OP(LOGSUMEXP, logsumexp, dc_reduce_backward)                                                   \
    OP(SEGMENT_REDUCE, segment_reduce, dc_segment_reduce_backward)                                 \
    OP(REDUCE_FN, reduce_fn, dc_reduce_fn_backward)                                                \
    OP(SCAN_FN, scan_fn, dc_scan_fn_backward)                                                      \
    OP(SEGMENT_REDUCE_FN, segment_reduce_fn, dc_segment_reduce_fn_backward)

#define DC_OP_ENUM_EW(ID, name, n_in, fwd, bwd, reads, n_targets, t0, t1) DC_OP_##ID,
#define DC_OP_ENUM_OP(ID, name, backward) DC_OP_##ID,
typedef enum dc_op { DC_OP_LIST(DC_OP_ENUM_EW, DC_OP_ENUM_OP) DC_OP_COUNT } dc_op;
#undef DC_OP_ENUM_EW
#undef DC_OP_ENUM_OP

#endif /* DC_OPS_OP_LIST_H */
