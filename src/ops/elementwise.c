/* Elementwise primitive ops, the EW rows of the op list (op_list.h): each
 * runs one engine kernel forward and one backward. */
#include <stdio.h>
#include <string.h>

#include "backward.h"
#include "ops_internal.h"

/* An elementwise op's row of the op list (op_list.h). */
typedef struct ew_op {
    const char *name;
    int n_in;
    dc_kernel_id forward;
    dc_kernel_id backward;
    const char *reads; /* 'g' the output's adjoint, 'y' the output, '0'..'2' the inputs */
    int n_targets;
    int targets[2]; /* input index receiving each backward output */
} ew_op;

#define EW_ROW(ID, name, n_in, fwd, bwd, reads, n_targets, t0, t1) \
    [DC_OP_##ID] = {#name, n_in, DC_K_##fwd, DC_K_##bwd, reads, n_targets, {t0, t1}},
#define OTHER_ROW(ID, name, backward)
static const ew_op ops[DC_OP_COUNT] = {DC_OP_LIST(EW_ROW, OTHER_ROW)};
#undef EW_ROW
#undef OTHER_ROW

static const char *const binary_labels[] = {"a", "b"};
static const char *const unary_labels[] = {"x"};
static const char *const select_labels[] = {"cond", "a", "b"};

static const char *const *labels_for(int n_in)
{
    return n_in == 1 ? unary_labels : n_in == 2 ? binary_labels : select_labels;
}

static dc_tensor *ew_forward(dc_tape *tape, dc_op op, dc_tensor *const *in, const dc_affine_arg *arg)
{
    const ew_op *d = &ops[op];
    char name[32];
    snprintf(name, sizeof name, "dc_op_%s", d->name);
    dc_tensor *y = dc_forward_kernel(tape, name, d->forward, arg, d->n_in, in, labels_for(d->n_in));
    if (!y || !dc_tape_wants_node(tape, d->n_in, in))
        return y;
    dc_node *node = dc_tape_record(tape, op, d->n_in, in, 1, &y);
    if (!node)
        return NULL;
    if (arg) {
        node->as.scalar.s = arg->s;
        node->as.scalar.t = arg->t;
    }
    return y;
}

/* The adjoint of every op in `ops`. */
dc_status dc_elementwise_backward(dc_tape *tape, dc_node *node)
{
    const ew_op *d = &ops[node->op];
    const dc_tensor *y = node->out[0];
    const dc_tensor *reads[4];
    int n_reads = 0;
    for (const char *r = d->reads; *r; ++r)
        reads[n_reads++] = *r == 'g' ? y->grad : *r == 'y' ? y : node->in[*r - '0'];
    dc_tensor *targets[2];
    for (int k = 0; k < d->n_targets; ++k)
        targets[k] = node->in[d->targets[k]];
    /* affine's adjoint scales by s only; hard_sigmoid's needs the slope. */
    const dc_affine_arg arg = {node->as.scalar.s, 0.0};
    const bool has_arg = node->op == DC_OP_AFFINE || node->op == DC_OP_HARD_SIGMOID;
    return dc_backward_kernel(tape, d->backward, has_arg ? &arg : NULL, y->ndim, y->shape, n_reads, reads,
                              d->n_targets, targets);
}

#define BINARY_OP(fn, op)                                                                          \
    dc_tensor *fn(dc_tape *tape, dc_tensor *a, dc_tensor *b)                                       \
    {                                                                                              \
        dc_tensor *in[2] = {a, b};                                                                 \
        return ew_forward(tape, op, in, NULL);                                                     \
    }
#define UNARY_OP(fn, op)                                                                           \
    dc_tensor *fn(dc_tape *tape, dc_tensor *x)                                                     \
    {                                                                                              \
        dc_tensor *in[1] = {x};                                                                    \
        return ew_forward(tape, op, in, NULL);                                                     \
    }

BINARY_OP(dc_op_add, DC_OP_ADD)
BINARY_OP(dc_op_sub, DC_OP_SUB)
BINARY_OP(dc_op_mul, DC_OP_MUL)
BINARY_OP(dc_op_div, DC_OP_DIV)
BINARY_OP(dc_op_pow, DC_OP_POW)
UNARY_OP(dc_op_neg, DC_OP_NEG)
UNARY_OP(dc_op_exp, DC_OP_EXP)
UNARY_OP(dc_op_log, DC_OP_LOG)
UNARY_OP(dc_op_tanh, DC_OP_TANH)
UNARY_OP(dc_op_sigmoid, DC_OP_SIGMOID)
UNARY_OP(dc_op_relu, DC_OP_RELU)

dc_tensor *dc_op_affine(dc_tape *tape, dc_tensor *x, double s, double t)
{
    dc_tensor *in[1] = {x};
    const dc_affine_arg arg = {s, t};
    return ew_forward(tape, DC_OP_AFFINE, in, &arg);
}

dc_tensor *dc_op_hard_sigmoid(dc_tape *tape, dc_tensor *x, double slope)
{
    dc_tensor *in[1] = {x};
    const dc_affine_arg arg = {slope, 0.0};
    return ew_forward(tape, DC_OP_HARD_SIGMOID, in, &arg);
}

dc_tensor *dc_op_step_st(dc_tape *tape, dc_tensor *x, double threshold)
{
    dc_tensor *in[1] = {x};
    const dc_affine_arg arg = {threshold, 0.0};
    return ew_forward(tape, DC_OP_STEP_ST, in, &arg);
}

dc_tensor *dc_op_select(dc_tape *tape, dc_tensor *cond, dc_tensor *a, dc_tensor *b)
{
    dc_tensor *in[3] = {cond, a, b};
    return ew_forward(tape, DC_OP_SELECT, in, NULL);
}
