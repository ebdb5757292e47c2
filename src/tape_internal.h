/* Nodes of the tape, the op table, and the helpers ops use to record nodes
 * and to write gradients. */
#ifndef DC_TAPE_INTERNAL_H
#define DC_TAPE_INTERNAL_H

#include "internal.h"
#include "ops/op_list.h"

struct dc_index_groups;
struct dc_axes;

typedef struct dc_node dc_node;

/* Adds the node's input gradients, given its output gradients. */
typedef dc_status (*dc_backward_fn)(dc_tape *tape, dc_node *node);

typedef struct dc_op_info {
    const char *name;
    dc_backward_fn backward;
} dc_op_info;

/* Indexed by dc_op (src/ops/op_list.h, src/ops/op_table.c). */
extern const dc_op_info dc_op_table[DC_OP_COUNT];

/* What an op's adjoint needs beyond its inputs and outputs, one struct per
 * op (the member named for the op in dc_node.as). */
typedef struct dc_node_scalar {
    double s, t; /* affine: y = x * s + t; hard sigmoid: slope s; step: threshold s */
} dc_node_scalar;
typedef struct dc_node_sum {
    double scale;     /* 1 for a sum, 1 / count for a mean */
    unsigned axes;    /* bit d set: axis d was reduced */
} dc_node_sum;
typedef struct dc_node_matmul {
    const dc_tensor *a, *b; /* the operands as the product read them (copies where BLAS could not) */
} dc_node_matmul;
typedef struct dc_node_transpose {
    int a0, a1;
} dc_node_transpose;
typedef struct dc_node_slice {
    int axis;
    int64_t start;
} dc_node_slice;
typedef struct dc_node_concat {
    int axis;
} dc_node_concat;
typedef struct dc_node_embedding {
    const int64_t *rows;                  /* CPU: the row of each id */
    const struct dc_index_groups *groups; /* CUDA: the ids' positions grouped by id */
} dc_node_embedding;
typedef struct dc_node_cross_entropy {
    const double *lse;      /* each row's largest logit and log of its sum of terms */
    const int64_t *targets; /* the target class of each row */
    const dc_tensor *logits;
} dc_node_cross_entropy;
typedef struct dc_node_scan {
    const dc_tensor *block;      /* the input as its [outer, len, inner] block (src/ops/axes.h) */
    const struct dc_axes *axes;  /* the axis, and the block's sizes */
    dc_reduction op;
    bool exclusive;
    /* CPU products: per piece of src/ops/scan.c, whether its inputs and
     * outputs are all finite and not zero (NULL elsewhere) */
    unsigned char *factors_ok;
} dc_node_scan;
typedef struct dc_node_reduce { /* prod, max, min, logsumexp */
    const struct dc_axes *axes; /* the reduced axes (tape memory) */
    const dc_tensor *block;     /* the input as the [outer, len, inner] block it was reduced as */
    const void *nz;             /* per output: prod's product of the nonzero elements */
    const int64_t *aux;         /* per output: prod's zero count; max's and min's winner along len */
} dc_node_reduce;
typedef struct dc_node_segment_reduce {
    int op;                   /* dc_reduction */
    const dc_tensor *values;  /* the values as reduced: contiguous, [n, width] */
    const int64_t *index;     /* each row's segment, where the kernels read it (NULL: from stored_index) */
    const void *stored_index; /* else the index as stored, checked, copied at the op (values' dtype) */
    const void *nz;           /* per output, as dc_node_reduce's (max, min: the winner's row) */
    const int64_t *aux;
} dc_node_segment_reduce;
typedef struct dc_node_broadcast_fn {
    const dc_bfn *fn;
    dc_partials_policy policy;
    void **partials; /* DC_PARTIALS_STORE: the m x D partial arrays, in tape memory */
} dc_node_broadcast_fn;

typedef struct dc_node_csr {
    const struct dc_csr *a; /* the sparse ops' pattern (src/sparse/) */
    bool transpose;         /* A^T for a product; along columns for a sum or gather */
} dc_node_csr;
struct dc_assoc_record; /* src/ops/assoc.c */
typedef struct dc_node_assoc {
    const dc_assoc *op;
    const struct dc_assoc_record *rec;
} dc_node_assoc;

struct dc_node {
    dc_op op;
    int region;
    int n_in;
    int n_out;
    dc_tensor **in;
    dc_tensor **out;
    union {
        dc_node_scalar scalar; /* the elementwise ops */
        dc_node_sum sum;
        dc_node_matmul matmul;
        dc_node_transpose transpose;
        dc_node_slice slice;
        dc_node_concat concat;
        dc_node_embedding embedding;
        dc_node_cross_entropy cross_entropy;
        dc_node_broadcast_fn broadcast_fn;
        dc_node_scan scan;
        dc_node_csr csr;
        dc_node_reduce reduce;
        dc_node_segment_reduce segment_reduce;
        dc_node_assoc assoc; /* the user-operator reductions and scans */
    } as;
};

struct dc_tape {
    dc_ctx *ctx;
    /* host: tensor headers, nodes, pointer arrays. Two arenas taking turns
     * from one reset to the next, so that the headers of the step before the
     * last reset stay intact: a tensor kept past a reset still reads as of
     * its old generation, and is refused (dc_tensor_check_live). */
    dc_arena meta[2];
    int meta_now; /* the arena of this step */
    dc_arena data; /* the context's device: tensor data, partials, gradients */
    /* The public function running on the tape, for messages of the shared
     * checks and allocations (set by dc_op_check_args and the tape's entry
     * points); adjoint_of: the op whose adjoint dc_backward is running. */
    const char *fn;
    const char *adjoint_of;
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
