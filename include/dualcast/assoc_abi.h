/* The binary interface between dualcast and the associative operators that a
 * build instantiates from user source (dc_add_assoc_fn in
 * cmake/DualcastAssocFn.cmake). Users never fill these structures by hand:
 * they declare an operator with DC_ASSOC_DECLARE(name) and pass
 * DC_ASSOC_REF(name) to the functions of assoc.h.
 *
 * Every kernel works on k-field states (k = the operator's n_state), each
 * field one array. The arrays of a launch are contiguous blocks laid out as
 * [outer, len, inner]: element (o, j, i) at (o * len + j) * inner + i. A
 * kernel of the CPU runs a range of the launch's work items and the library
 * splits the items among its threads; a CUDA launcher runs them all. */
#ifndef DUALCAST_ASSOC_ABI_H
#define DUALCAST_ASSOC_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever the layout below or a rule the kernels and the library
 * share changes; the functions of assoc.h refuse an operator compiled
 * against another version. */
#define DC_ASSOC_ABI_VERSION 7

#define DC_ASSOC_MAX_STATE 4 /* fields of one state */

/* Elements per piece of a row (see Determinism in assoc.h): the chunk of
 * the library's launches, which the kernels take as a constant where a
 * launch's chunk is this one. Not a power of two: the CPU walks several
 * pieces side by side, and pieces 4 KiB apart would share the same cache
 * sets (the reduction's gradient of 10^7 float32 pairs took 2.8x longer
 * with 1024); 1008 keeps each piece of float32 or float64 on whole 64-byte
 * lines. */
#define DC_ASSOC_CHUNK 1008

/* The longest piece of a reduce-adjoint launch that a CPU kernel walks in a
 * buffer of its own (scratch NULL). */
#define DC_ASSOC_MAX_CHUNK 1024

/* The CPU's reduce-adjoint group walks the library's pieces in such a
 * buffer (broadcast/assoc_kernels.h, dc_assoc_reduce_group_fits). */
#if DC_ASSOC_CHUNK > DC_ASSOC_MAX_CHUNK
#error "DC_ASSOC_CHUNK must not exceed DC_ASSOC_MAX_CHUNK"
#endif

/* CUDA: the threads of a block that takes a whole piece (a scan's, or the
 * pieces of a reduce-adjoint launch), each walking a run of its steps. */
#define DC_ASSOC_CUDA_BLOCK_THREADS 128

/* CUDA: whether the pieces of a reduce-adjoint launch (DC_ASSOC_RED_PIECES)
 * go a block each, rows of one lane of at least two steps per thread, with
 * no scratch (else a thread each, its r_j in the launch's scratch). */
static inline int dc_assoc_cuda_reduce_by_block(int64_t inner, int64_t len, int64_t chunk)
{
    return inner == 1 && len >= 2 * DC_ASSOC_CUDA_BLOCK_THREADS && chunk <= DC_ASSOC_MAX_CHUNK;
}

/* Flags of a scan launch. */
enum {
    DC_ASSOC_EXCLUSIVE = 1,    /* y[j] is the state before element j is combined */
    DC_ASSOC_REVERSE = 2,      /* walk from the last step to the first, combining x[j] (+) carry */
    DC_ASSOC_FROM_NEUTRAL = 4, /* every piece starts from the neutral element, not from its carry */
};

/* A scan along len, in pieces: each row (o, i) is cut into pieces of
 * `chunk` steps (the last one shorter; one piece when len is 0), and piece
 * c of row o, lane i, starts from carry[(o * n_chunks + c) * inner + i]
 * (or the neutral element), combines its steps in order and leaves its
 * total there. y, when y[0] is not NULL, receives the running state
 * (inclusive or exclusive); x may be y (each element is read before it is
 * written). With seg_start not NULL the pieces are segments instead: piece
 * o (o < outer) walks the rows seg_rows[seg_start[o]] ..
 * seg_rows[seg_start[o + 1] - 1] of [*, inner] arrays, its carry at
 * o * inner + i (len and chunk unused). Work items: one per piece (all its
 * lanes) on the CPU; one per piece and lane on CUDA. */
typedef struct dc_assoc_scan_launch {
    int64_t outer, len, inner, chunk;
    const int64_t *seg_start; /* outer + 1 entries, or NULL */
    const int64_t *seg_rows;
    const void *x[DC_ASSOC_MAX_STATE];
    void *y[DC_ASSOC_MAX_STATE];
    void *carry[DC_ASSOC_MAX_STATE];
    int32_t flags;
    int32_t block;      /* CUDA: threads per block */
    int32_t max_blocks; /* CUDA: grid size cap */
    int32_t pad_;
    void *stream; /* CUDA: cudaStream_t */
} dc_assoc_scan_launch;

/* Elementwise over [shape[0], shape[1], shape[2]], element e in row-major
 * order: the operator applied to the pair (l, r) read from in[0..k-1] (l)
 * and in[k..2k-1] (r) through their strides (in elements, per axis), as a
 * dual number. Writes, for each array that is not NULL:
 *   val[f][e]    field f of l (+) r;
 *   adj[j][e]    sum over f of u_f * d(l (+) r)_f / d in_j (j < 2k), the
 *                vector-Jacobian product with the adjoints u[0..k-1], read
 *                through u_strides (u[0] NULL: adj is not written).
 * A bit of `indexed` (bit j for in[j], bit 2k + f for u[f]) reads that
 * array at row_index[i1] in place of the axis-1 index i1.
 * Work items: the elements. */
typedef struct dc_assoc_vjp_launch {
    int64_t shape[3];
    const int64_t *row_index;
    const void *in[2 * DC_ASSOC_MAX_STATE];
    int64_t in_strides[2 * DC_ASSOC_MAX_STATE][3];
    const void *u[DC_ASSOC_MAX_STATE];
    int64_t u_strides[DC_ASSOC_MAX_STATE][3];
    void *val[DC_ASSOC_MAX_STATE];
    void *adj[2 * DC_ASSOC_MAX_STATE];
    uint32_t indexed;
    int32_t block, max_blocks, pad_;
    void *stream;
} dc_assoc_vjp_launch;

/* The adjoint of an inclusive (or, with `exclusive`, exclusive) scan
 * z = scan(a) along len, per row (o, i), from the last step to the first:
 *   p_j = the state before step j (z[j - 1], or the neutral element at
 *         j = 0; the exclusive scan's own z[j]),
 *   lambda = zbar_j' + carry, where zbar_j' is g[j] (inclusive) or g[j + 1]
 *         (exclusive, 0 at the last step),
 *   (carry, gx[j]) = lambda^T d(p_j (+) a_j) / d(p_j, a_j).
 * a = x, z = y and the adjoints g are [outer, len, inner] blocks (a NULL
 * g[f]: field f's adjoint is zero); gx receives a's adjoint (gx[f] NULL:
 * not wanted; bit f of `accumulate` set: added to gx[f], else assigned;
 * streaming nonzero: a CPU kernel may assign them with streaming stores, as
 * the reduce-adjoint launch's below). The carry leaving a run of steps is
 * affine in the carry entering it, so a long row is done in pieces of
 * `chunk` steps (n_chunks per row), in phases:
 *   DC_ASSOC_ADJ_WHOLE   each row at once (items: outer * inner);
 *   DC_ASSOC_ADJ_MAPS    each piece's affine map, carry_out = M carry_in + v,
 *                        into maps[item * (k * k + k)]: M by columns (entry
 *                        (f, q) at q * k + f), then v (items: outer *
 *                        n_chunks * inner, item ((o * n_chunks + c) * inner + i));
 *   DC_ASSOC_ADJ_CARRIES each row's pieces from the last: the carry entering
 *                        each, into carry[item * k] (items: outer * inner);
 *   DC_ASSOC_ADJ_PIECES  each piece from its carry, writing gx (items as for
 *                        DC_ASSOC_ADJ_MAPS). */
enum { DC_ASSOC_ADJ_WHOLE = 0, DC_ASSOC_ADJ_MAPS = 1, DC_ASSOC_ADJ_CARRIES = 2, DC_ASSOC_ADJ_PIECES = 3 };

typedef struct dc_assoc_scan_adjoint_launch {
    int64_t outer, len, inner, chunk;
    int32_t exclusive;
    int32_t phase;
    int32_t block, max_blocks;
    uint32_t accumulate;
    int32_t streaming;
    const void *x[DC_ASSOC_MAX_STATE];
    const void *y[DC_ASSOC_MAX_STATE];
    const void *g[DC_ASSOC_MAX_STATE];
    void *gx[DC_ASSOC_MAX_STATE];
    void *maps;  /* DC_ASSOC_ADJ_MAPS, DC_ASSOC_ADJ_CARRIES */
    void *carry; /* DC_ASSOC_ADJ_CARRIES, DC_ASSOC_ADJ_PIECES */
    void *stream;
} dc_assoc_scan_adjoint_launch;

/* The adjoint of a reduction y = a_0 (+) ... (+) a_{len-1} of each row
 * (o, i) of an [outer, len, inner] block: gx[j] = ybar^T d(l_j (+) a_j (+)
 * r_j)/d a_j, l_j the elements before j combined from the left, r_j those
 * after it, from dual passes of the operator only (the partials of
 * t = l_j (+) a_j with respect to a_j, carried through t (+) r_j). A row is
 * walked in pieces of `chunk` steps (n_chunks per row), in phases:
 *   DC_ASSOC_RED_CARRIES each row's pieces: from their totals (totals,
 *                        [outer, n_chunks, inner]), the state before each
 *                        piece into left and the state after it into right
 *                        (same layout) (items: outer * inner);
 *   DC_ASSOC_RED_PIECES  each piece and lane: the r_j of its steps, from
 *                        right[piece] (the neutral element with right[0]
 *                        NULL) walking back, into a buffer of min(chunk,
 *                        len) * k (scratch + item * min(chunk, len) * k,
 *                        or the CPU kernel's
 *                        own with scratch NULL and chunk <=
 *                        DC_ASSOC_MAX_CHUNK; on CUDA scratch is read
 *                        only where dc_assoc_cuda_reduce_by_block is
 *                        false), then the l_j from
 *                        left[piece] (or neutral) walking forward, writing
 *                        gx (items: outer * n_chunks * inner, item
 *                        (o * n_chunks + c) * inner + i).
 * g[f] ([outer, inner]) NULL: field f's adjoint is zero. gx[f] NULL: not
 * wanted; bit f of `accumulate` set: gx[f] is added to, else assigned.
 * streaming nonzero: a CPU kernel may assign the gx[f] with streaming
 * stores, which bypass the cache (the library asks for it where the
 * gradients are too large for the cache to keep); CUDA ignores it. */
enum { DC_ASSOC_RED_CARRIES = 0, DC_ASSOC_RED_PIECES = 1 };

typedef struct dc_assoc_reduce_adjoint_launch {
    int64_t outer, len, inner, chunk;
    int32_t phase;
    uint32_t accumulate;
    int32_t block, max_blocks;
    int32_t streaming;
    const void *x[DC_ASSOC_MAX_STATE];
    const void *totals[DC_ASSOC_MAX_STATE];
    void *left[DC_ASSOC_MAX_STATE];
    void *right[DC_ASSOC_MAX_STATE];
    const void *g[DC_ASSOC_MAX_STATE];
    void *gx[DC_ASSOC_MAX_STATE];
    void *scratch;
    void *stream;
} dc_assoc_reduce_adjoint_launch;

/* CPU kernels: work items [begin, end) of a launch. */
typedef void (*dc_assoc_cpu_scan)(const dc_assoc_scan_launch *launch, int64_t begin, int64_t end);
typedef void (*dc_assoc_cpu_vjp)(const dc_assoc_vjp_launch *launch, int64_t begin, int64_t end);
typedef void (*dc_assoc_cpu_scan_adjoint)(const dc_assoc_scan_adjoint_launch *launch, int64_t begin, int64_t end);
typedef void (*dc_assoc_cpu_reduce_adjoint)(const dc_assoc_reduce_adjoint_launch *launch, int64_t begin,
                                            int64_t end);

typedef struct dc_assoc_cpu_kernels {
    dc_assoc_cpu_scan scan;
    dc_assoc_cpu_vjp vjp;
    dc_assoc_cpu_scan_adjoint scan_adjoint;
    dc_assoc_cpu_reduce_adjoint reduce_adjoint;
} dc_assoc_cpu_kernels;

/* CUDA launchers: every work item of a launch, queued on its stream.
 * Return a cudaError_t (0 on success). */
typedef struct dc_assoc_cuda_kernels {
    int (*scan)(const dc_assoc_scan_launch *launch);
    int (*vjp)(const dc_assoc_vjp_launch *launch);
    int (*scan_adjoint)(const dc_assoc_scan_adjoint_launch *launch);
    int (*reduce_adjoint)(const dc_assoc_reduce_adjoint_launch *launch);
} dc_assoc_cuda_kernels;

enum { DC_ASSOC_F32 = 0, DC_ASSOC_F64 = 1 };

/* What the build registers for one associative operator. */
typedef struct dc_assoc {
    int abi_version;
    const char *name;
    int n_state;                       /* k: fields of a state */
    const char *const *field_names;    /* n_state */
    const double *neutral;             /* n_state: the neutral element as written */
    dc_assoc_cpu_kernels cpu[2];       /* [DC_ASSOC_F32], [DC_ASSOC_F64] */
    const dc_assoc_cuda_kernels *cuda; /* [2] by dtype, or NULL when built without CUDA */
} dc_assoc;

/* Declares the operator registered as `name` (the first argument of its
 * DC_ASSOC). Refer to it as DC_ASSOC_REF(name). */
#define DC_ASSOC_DECLARE(name) extern const dc_assoc dc_assoc_##name
#define DC_ASSOC_REF(name) (&dc_assoc_##name)

#ifdef __cplusplus
}
#endif

#endif /* DUALCAST_ASSOC_ABI_H */
