/* Tensors and the tape's allocations, shared by the library's upper floor
 * (tensors, tape, ops, optimizers, checkpoints); not installed. Below it:
 * the loop engine (src/engine/) and the runtime (src/runtime/). */
#ifndef DC_INTERNAL_H
#define DC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dualcast.h>

#include "engine/loop.h"
#include "engine/shape.h"
#include "runtime/runtime.h"

struct dc_tensor {
    dc_ctx *ctx;
    dc_tape *tape;        /* owner, or NULL for a persistent tensor */
    uint64_t generation;  /* tape generation at creation */
    dc_dtype dtype;
    int ndim;
    int64_t numel;
    int64_t shape[DC_MAX_DIMS];
    int64_t strides[DC_MAX_DIMS]; /* elements */
    void *data;           /* first element, on the context's device */
    void *alloc;          /* owned allocation of a persistent tensor, or NULL */
    dc_tensor *grad;      /* contiguous, same shape; owned by this tensor */
    bool requires_grad;   /* a parameter, or computed from one while recording */
    bool grad_valid;      /* grad holds a value; else it counts as zero */
    bool is_leaf;         /* not the output of a recorded node */
    bool is_grad;         /* the gradient buffer of another tensor */
    bool grad_in_base;    /* grad is a view into slice_base's gradient */
    uint64_t visit;       /* the stamp of the last dc_tensors_repeated that saw it */
    dc_tensor *slice_base; /* for a recorded slice: the tensor it views ... */
    int slice_axis;        /* ... along this axis ... */
    int64_t slice_start;   /* ... from this element */
    char name[32];
};

/* ---- tensors (src/tensor.c) ---- */

/* Fills a loop input to read tensor t in the loop's shape (broadcast
 * strides), and a loop output writing (or summing) into t. */
void dc_loop_in_tensor(dc_loop_in *in, const dc_tensor *t, int ndim, const int64_t *shape);
void dc_loop_out_tensor(dc_loop_out *out, dc_tensor *t, int ndim, const int64_t *shape, dc_write_mode mode);

/* Checks ndim and dims for a new tensor; names `what` in the message. */
dc_status dc_check_shape(dc_ctx *ctx, const char *what, int ndim, const int64_t *shape);

/* Fills the header of a contiguous tensor (no data). */
void dc_tensor_init_header(dc_tensor *t, dc_ctx *ctx, dc_dtype dtype, int ndim, const int64_t *shape);

/* A new tape tensor with uninitialized contiguous data; NULL when out of memory. */
dc_tensor *dc_tape_alloc_tensor(dc_tape *tape, dc_dtype dtype, int ndim, const int64_t *shape);

/* A tape tensor header sharing `data` (a view); strides given. */
dc_tensor *dc_tape_alloc_view(dc_tape *tape, const dc_tensor *base, int ndim, const int64_t *shape,
                              const int64_t *strides, void *data);

/* Bytes of tape memory, aligned for any element type (device memory). */
void *dc_tape_alloc_data(dc_tape *tape, size_t bytes);

/* Host memory on the tape for bookkeeping (nodes, pointer arrays). */
void *dc_tape_alloc_meta(dc_tape *tape, size_t bytes);

/* DC_ERR_STATE, naming `fn` and `what` (for example "input a"), for a tape
 * tensor whose tape was reset since it was made; DC_OK for any other. The
 * tape keeps the headers of the step before its last reset intact for this
 * check, so a tensor kept past one reset is caught; past two, its pointer
 * may name a newer tensor, as any dangling pointer can. */
dc_status dc_tensor_check_live(const dc_tensor *t, const char *fn, const char *what);

/* The index of the first tensor of the n that repeats an earlier one, or -1
 * when all differ. O(n), no allocation: each tensor is stamped as seen. Not
 * for two threads on one tensor at once (one context, one thread). */
int dc_tensors_repeated(dc_ctx *ctx, int n, dc_tensor *const *tensors);

/* While a step is captured (src/graph.c), the ops it queues are noted:
 * their name and their operands' addresses, dtypes and shapes make the
 * signature dc_graph_verify compares. Nothing happens outside a capture. */
void dc_capture_note_op(dc_ctx *ctx, const char *op, int n, dc_tensor *const *in);

/* A name for messages: the tensor's name, or its shape. */
const char *dc_tensor_label(const dc_tensor *t, char *buf, size_t size);

#endif /* DC_INTERNAL_H */
