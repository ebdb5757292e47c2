/* Nodes of the tape, the op table, and the helpers ops use to record nodes
 * and to write gradients. */
#ifndef DC_TAPE_INTERNAL_H
#define DC_TAPE_INTERNAL_H

#include "../broadcast/loop.h"
#include "internal.h"

typedef enum dc_op {
    DC_OP_ADD,
    DC_OP_SUB,
    DC_OP_MUL,
    DC_OP_DIV,
    DC_OP_POW,
    DC_OP_AFFINE,
    DC_OP_NEG,
    DC_OP_EXP,
    DC_OP_LOG,
    DC_OP_TANH,
    DC_OP_SIGMOID,
    DC_OP_RELU,
    DC_OP_HARD_SIGMOID,
    DC_OP_STEP,
    DC_OP_SELECT,
    DC_OP_SUM,
    DC_OP_MATMUL,
    DC_OP_TRANSPOSE,
    DC_OP_RESHAPE,
    DC_OP_SLICE,
    DC_OP_CONCAT,
    DC_OP_EMBEDDING,
    DC_OP_CROSS_ENTROPY,
    DC_OP_BROADCAST_FN,
    DC_OP_COUNT
} dc_op;

typedef struct dc_node dc_node;

/* Adds the node's input gradients, given its output gradients. */
typedef dc_status (*dc_backward_fn)(dc_tape *tape, dc_node *node);

typedef struct dc_op_info {
    const char *name;
    dc_backward_fn backward;
} dc_op_info;

/* Indexed by dc_op (src/ops/op_table.c). */
extern const dc_op_info dc_op_table[DC_OP_COUNT];

struct dc_node {
    dc_op op;
    int region;
    int n_in;
    int n_out;
    dc_tensor **in;
    dc_tensor **out;
    /* What the op's backward needs beyond its inputs and outputs. */
    double scalar[2];
    int ints[DC_MAX_DIMS + 2];
    const void *ptr;
    void **saved; /* op-owned tape memory, e.g. a broadcast node's partials */
};

struct dc_tape {
    dc_ctx *ctx;
    dc_arena meta; /* host: tensor headers, nodes, pointer arrays */
    dc_arena data; /* the context's device: tensor data, partials, gradients */
    dc_node **nodes;
    size_t n_nodes;
    size_t cap_nodes;
    uint64_t generation;
    bool recording;
    bool backward_done;
    bool timing;
    int region;
    double region_seconds[DC_TAPE_REGIONS];
    void *zero; /* one zero element (8 bytes) on the device, for absent adjoints */
};

/* Whether an op on these inputs records a node: recording is on and some
 * input requires a gradient. */
bool dc_tape_wants_node(const dc_tape *tape, int n_in, dc_tensor *const *in);

/* Appends a node; its outputs become non-leaf tensors requiring gradients.
 * Returns NULL when out of memory (message set). */
dc_node *dc_tape_record(dc_tape *tape, dc_op op, int n_in, dc_tensor *const *in, int n_out,
                        dc_tensor *const *out);

/* Readies t's gradient for a contribution: allocates it on first use and
 * says whether the contribution overwrites (no value yet) or adds. Call
 * dc_grad_done(t) once written. */
dc_status dc_grad_prepare(dc_tape *tape, dc_tensor *t, dc_write_mode *mode);
void dc_grad_done(dc_tensor *t);

/* Readies t's gradient for a contribution to part of it (a slice, some rows
 * of a table): zeroes it first when it holds no value yet, then every write
 * adds. Marks it written. */
dc_status dc_grad_prepare_partial(dc_tape *tape, dc_tensor *t);

/* The adjoint of output t of a node: its gradient, or a zero scalar when no
 * gradient reached it (read it with broadcast strides). */
const dc_tensor *dc_node_adjoint(dc_tape *tape, const dc_tensor *t, dc_tensor *zero_view);

/* Checks the arguments common to every op: tape and inputs not NULL (a NULL
 * input keeps the message of the error that produced it). */
dc_status dc_op_check_args(dc_tape *tape, const char *op, int n, dc_tensor *const *in,
                           const char *const *labels);

#endif /* DC_TAPE_INTERNAL_H */
