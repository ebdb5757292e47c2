/* A loop over a broadcast: the description every elementwise op, broadcast
 * node and reduction hands to the engine.
 *
 * The engine walks an iteration shape in chunks. For each chunk it gives the
 * kernel contiguous pointers: straight into the arrays where they are
 * contiguous over the chunk, else into per-thread tiles it fills (a broadcast
 * value repeated, or a strided gather). The kernel's results go straight to
 * contiguous outputs, or from tiles into strided outputs, added to them, or
 * summed over the axes along which an output's stride is 0 (unbroadcast).
 * Those sums are accumulated in double precision in per-thread buffers and
 * combined in thread order, so results are the same from run to run. */
#ifndef DC_ENGINE_LOOP_H
#define DC_ENGINE_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "../runtime/runtime.h"

#define DC_LOOP_MAX_ARRAYS 160

typedef void (*dc_chunk_fn)(int64_t n, const void *const *in, void *const *out, const void *arg);

typedef enum dc_write_mode {
    DC_WRITE_ASSIGN = 0,     /* overwrite (each element of an output written once, or summed once) */
    DC_WRITE_ACCUMULATE = 1, /* add to what is there */
    DC_WRITE_DISCARD = 2,    /* the kernel computes it, nobody needs it */
} dc_write_mode;

typedef struct dc_loop_in {
    const void *data;
    int64_t strides[DC_MAX_DIMS]; /* in elements, per axis of the iteration shape; 0: broadcast */
    bool control;                 /* its uniformity over a chunk selects kernel_uniform */
} dc_loop_in;

typedef struct dc_loop_out {
    void *data;
    int64_t strides[DC_MAX_DIMS]; /* 0 along the axes summed over */
    dc_write_mode mode;
} dc_loop_out;

typedef struct dc_loop {
    dc_dtype dtype;
    int ndim;
    int64_t shape[DC_MAX_DIMS];
    int n_in;
    const dc_loop_in *in;
    int n_out;
    const dc_loop_out *out;
    dc_chunk_fn kernel;
    dc_chunk_fn kernel_uniform; /* optional: every control input constant over the chunk */
    const void *arg;
    /* The kernel's arithmetic, not its memory traffic, sets its time (a
     * broadcast function's body): the loop is split across threads as soon
     * as it has two chunks. */
    bool heavy;
} dc_loop;

/* Runs the loop on the context's CPU threads (ctx->cpu), reporting errors
 * in ctx: DC_ERR_MEMORY (scratch), DC_ERR_ARG (too many arrays). */
dc_status dc_loop_run_cpu(dc_ctx *ctx, const dc_loop *loop);

/* Whether two of a loop's n_out outputs (in its iteration shape) may write a
 * common element without being the same view: shifted slices of one
 * gradient. The CPU runs such a loop on one thread, and the GPU writes such
 * outputs one after another: written in parallel, two threads would add into
 * that element at once. The same view twice is safe (each element of both
 * belongs to one thread), and so are interleaved views that never meet (the
 * column blocks of one tensor). Never false when two outputs share an
 * element; exact for views with the same strides into a dense tensor, and
 * true, to be safe, when it cannot tell (other strides whose memory spans
 * meet). */
bool dc_outputs_overlap(dc_dtype dtype, int ndim, const int64_t *shape, int n_out, const dc_loop_out *out);

#endif /* DC_ENGINE_LOOP_H */
