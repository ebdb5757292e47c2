/* Prefix scans along one axis (dc_op_scan), one node each: the input seen as
 * an [outer, len, inner] block (axes.h), scanned along len. The formulas,
 * forward and adjoint, are scan_formulas.h's, shared with CUDA (scan.cu).
 *
 * On the CPU a piece of work is a group of up to CPU_WIDTH neighbouring
 * lines (columns, or one row where inner is 1) over a chunk of len. Where
 * lines are few and long, each is cut into chunks of CPU_CHUNK elements:
 * every chunk is summarized alone (its total, or the affine map of its
 * adjoint), the summaries of a line are chained in order, and every chunk is
 * scanned again from its carry. The pieces depend on the shape only, so the
 * result has the same bits on any number of threads. */
#include <math.h>
#include <string.h>

#include "../../broadcast/pp.h"
#include "../../dual/scalar_math.h"
#include "../cuda/scan_cuda.h"
#include "axes.h"
#include "backward.h"

#define DC_S float
#define DC_SFX f32
#include "scan_formulas.h"
#undef DC_S
#undef DC_SFX
#define DC_S double
#define DC_SFX f64
#include "scan_formulas.h"
#undef DC_S
#undef DC_SFX

/* CPU_CHUNK: elements of a line per chunk where lines are cut; they are cut
 * where they are longer and the groups fewer than CPU_FEW_GROUPS. */
enum { CPU_CHUNK = 4096, CPU_WIDTH = 64, CPU_FEW_GROUPS = 64 };

typedef struct cpu_plan {
    int op;
    bool exclusive;
    int64_t len, inner;
    int64_t width;      /* lines per group: min(inner, CPU_WIDTH) */
    int64_t col_groups; /* groups per index of outer */
    int64_t groups;
    int64_t chunk, chunks; /* per line */
} cpu_plan;

static cpu_plan plan_cpu(int op, bool exclusive, const dc_axes *ax)
{
    cpu_plan p;
    p.op = op;
    p.exclusive = exclusive;
    p.len = ax->len;
    p.inner = ax->inner;
    p.width = ax->inner < CPU_WIDTH ? ax->inner : CPU_WIDTH;
    p.col_groups = p.width ? (ax->inner + p.width - 1) / p.width : 0;
    p.groups = ax->outer * p.col_groups;
    p.chunks = ax->len == 0                                       ? 0
               : ax->len > CPU_CHUNK && p.groups < CPU_FEW_GROUPS ? (ax->len + CPU_CHUNK - 1) / CPU_CHUNK
                                                                  : 1;
    p.chunk = p.chunks > 1 ? CPU_CHUNK : ax->len;
    return p;
}

/* Where piece p (group and chunk) lies: the offset of its first line, its
 * lines and its positions [b, e). */
typedef struct cpu_piece {
    int64_t offset, lines, b, e;
} cpu_piece;

static cpu_piece piece_of(const cpu_plan *p, int64_t k)
{
    const int64_t g = k / p->chunks, c = k % p->chunks;
    const int64_t o = g / p->col_groups, j0 = (g % p->col_groups) * p->width;
    cpu_piece q;
    q.offset = o * p->len * p->inner + j0;
    q.lines = p->inner - j0 < p->width ? p->inner - j0 : p->width;
    q.b = c * p->chunk;
    q.e = q.b + p->chunk < p->len ? q.b + p->chunk : p->len;
    return q;
}

enum { SUMMARIZE, APPLY };

#define DEFINE_CPU_SCAN(T, SFX)                                                                                        \
    /* SUMMARIZE: the piece's totals into sums; APPLY: its outputs, from the                                           \
     * carries in sums (the neutral element where lines are not cut) */                                                \
    static void forward_piece_##SFX(const cpu_plan *p, int64_t k, const T *x, T *y, double *sums, int mode)            \
    {                                                                                                                  \
        const cpu_piece q = piece_of(p, k);                                                                            \
        double acc[CPU_WIDTH];                                                                                         \
        double *sum = sums ? sums + k * p->width : NULL;                                                               \
        for (int64_t j = 0; j < q.lines; ++j)                                                                          \
            acc[j] = mode == APPLY && sum ? sum[j] : dc_scan_neutral(p->op);                                           \
        for (int64_t i = q.b; i < q.e; ++i) {                                                                          \
            const T *xi = x + q.offset + i * p->inner;                                                                 \
            T *yi = y + q.offset + i * p->inner;                                                                       \
            for (int64_t j = 0; j < q.lines; ++j) {                                                                    \
                if (mode == APPLY && p->exclusive)                                                                     \
                    yi[j] = (T)acc[j];                                                                                 \
                acc[j] = dc_scan_combine(p->op, acc[j], (double)xi[j]);                                                \
                if (mode == APPLY && !p->exclusive)                                                                    \
                    yi[j] = (T)acc[j];                                                                                 \
            }                                                                                                          \
        }                                                                                                              \
        for (int64_t j = 0; mode == SUMMARIZE && j < q.lines; ++j)                                                     \
            sum[j] = acc[j];                                                                                           \
    }                                                                                                                  \
    /* SUMMARIZE: the affine map of the piece's adjoint into maps; APPLY: the                                          \
     * input's adjoint gx, from the adjoint after the chunk in maps (0 where                                           \
     * lines are not cut) */                                                                                           \
    static void adjoint_piece_##SFX(const cpu_plan *p, int64_t k, const T *x, const T *y, const T *g, T *gx,           \
                                    dc_scan_affine *maps, int mode)                                                    \
    {                                                                                                                  \
        const cpu_piece q = piece_of(p, k);                                                                            \
        dc_scan_affine acc[CPU_WIDTH];                                                                                 \
        dc_scan_affine *map = maps ? maps + k * p->width : NULL;                                                       \
        for (int64_t j = 0; j < q.lines; ++j)                                                                          \
            acc[j] = mode == APPLY && map ? map[j] : dc_scan_affine_identity();                                        \
        for (int64_t i = q.e; i-- > q.b;) {                                                                            \
            for (int64_t j = 0; j < q.lines; ++j) {                                                                    \
                const int64_t at = q.offset + j;                                                                       \
                const dc_scan_terms t =                                                                                \
                    dc_scan_terms_##SFX(p->op, p->exclusive, x + at, y + at, g + at, i, p->len, p->inner);             \
                const dc_scan_affine here = {t.c, t.k};                                                                \
                if (mode == SUMMARIZE) {                                                                               \
                    acc[j] = dc_scan_affine_then(acc[j], here);                                                        \
                } else {                                                                                               \
                    acc[j].c = t.c + dc_scan_mul(t.k, acc[j].c);                                                       \
                    gx[at + i * p->inner] = (T)dc_scan_mul(t.s, acc[j].c);                                             \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
        for (int64_t j = 0; mode == SUMMARIZE && j < q.lines; ++j)                                                     \
            map[j] = acc[j];                                                                                           \
    }
DEFINE_CPU_SCAN(float, f32)
DEFINE_CPU_SCAN(double, f64)

/* Each chunk's total replaced by the total of the chunks before it in its
 * line, in order. */
static void chain_totals(const cpu_plan *p, int64_t g, double *sums)
{
    for (int64_t j = 0; j < piece_of(p, g * p->chunks).lines; ++j) {
        double carry = dc_scan_neutral(p->op);
        for (int64_t c = 0; c < p->chunks; ++c) {
            double *s = sums + (g * p->chunks + c) * p->width + j;
            const double total = *s;
            *s = carry;
            carry = dc_scan_combine(p->op, carry, total);
        }
    }
}

/* Each chunk's adjoint map replaced by the map of the chunks after it. */
static void chain_maps(const cpu_plan *p, int64_t g, dc_scan_affine *maps)
{
    for (int64_t j = 0; j < piece_of(p, g * p->chunks).lines; ++j) {
        dc_scan_affine after = dc_scan_affine_identity();
        for (int64_t c = p->chunks; c-- > 0;) {
            dc_scan_affine *m = maps + (g * p->chunks + c) * p->width + j;
            const dc_scan_affine own = *m;
            *m = after;
            after = dc_scan_affine_then(after, own);
        }
    }
}

/* The scan (adjoint false: y from x) or its adjoint (gx from x, y, g), on
 * the CPU, in one or three parallel passes. */
static dc_status scan_cpu(dc_tape *tape, const cpu_plan *p, dc_dtype dtype, bool adjoint, const void *x, const void *y,
                          const void *g, void *out)
{
    const int64_t n_pieces = p->groups * p->chunks;
    const int64_t numel = p->groups * p->width * p->len;
    const int n_threads = numel > 32768 ? tape->ctx->cpu.num_threads : 1;
    double *sums = NULL;
    if (p->chunks > 1) {
        sums = dc_tape_alloc_meta(tape, (size_t)n_pieces * (size_t)p->width * sizeof(dc_scan_affine));
        if (!sums)
            return DC_ERR_MEMORY;
    }
    dc_scan_affine *maps = (dc_scan_affine *)sums;
    const bool f32 = dtype == DC_F32;
    for (int pass = p->chunks > 1 ? 0 : 2; pass < 3; ++pass) {
        if (pass == 1) {
#pragma omp parallel for num_threads(n_threads) schedule(static)
            for (int64_t gi = 0; gi < p->groups; ++gi) {
                if (adjoint)
                    chain_maps(p, gi, maps);
                else
                    chain_totals(p, gi, sums);
            }
            continue;
        }
        const int mode = pass == 0 ? SUMMARIZE : APPLY;
#pragma omp parallel for num_threads(n_threads) schedule(static)
        for (int64_t k = 0; k < n_pieces; ++k) {
            if (adjoint && f32)
                adjoint_piece_f32(p, k, x, y, g, out, maps, mode);
            else if (adjoint)
                adjoint_piece_f64(p, k, x, y, g, out, maps, mode);
            else if (f32)
                forward_piece_f32(p, k, x, out, sums, mode);
            else
                forward_piece_f64(p, k, x, out, sums, mode);
        }
    }
    return DC_OK;
}

dc_tensor *dc_op_scan(dc_tape *tape, dc_tensor *x, dc_reduction op, int axis, bool exclusive)
{
    const char *const labels[] = {"x"};
    if (dc_op_check_args(tape, "dc_op_scan", 1, &x, labels) != DC_OK)
        return NULL;
    dc_ctx *ctx = tape->ctx;
    if (op != DC_REDUCE_SUM && op != DC_REDUCE_PROD && op != DC_REDUCE_MAX && op != DC_REDUCE_MIN) {
        dc_error(ctx, DC_ERR_ARG,
                 "dc_op_scan: op %d is not one of DC_REDUCE_SUM, DC_REDUCE_PROD, DC_REDUCE_MAX, "
                 "DC_REDUCE_MIN",
                 (int)op);
        return NULL;
    }
    dc_axes ax;
    if (dc_axes_parse(ctx, "dc_op_scan", x, 1, &axis, true, &ax) != DC_OK)
        return NULL;
    const dc_tensor *xb = dc_axes_block(tape, x, &ax);
    dc_tensor *y = xb ? dc_tape_alloc_tensor(tape, x->dtype, x->ndim, x->shape) : NULL;
    if (!y)
        return NULL;
    if (ctx->cuda) {
        const size_t bytes = dc_cuda_scan_parts_bytes(ax.outer, ax.len, ax.inner, false);
        void *parts = bytes ? dc_tape_alloc_data(tape, bytes) : NULL;
        if ((bytes && !parts) || dc_cuda_scan(ctx, x->dtype, (int)op, exclusive, xb->data, y->data, ax.outer, ax.len,
                                              ax.inner, parts) != DC_OK)
            return NULL;
    } else {
        const cpu_plan p = plan_cpu((int)op, exclusive, &ax);
        if (scan_cpu(tape, &p, x->dtype, false, xb->data, NULL, NULL, y->data) != DC_OK)
            return NULL;
    }
    if (!dc_tape_wants_node(tape, 1, &x))
        return y;
    dc_axes *kept = dc_tape_alloc_meta(tape, sizeof *kept);
    dc_node *node = kept ? dc_tape_record(tape, DC_OP_SCAN, 1, &x, 1, &y) : NULL;
    if (!node)
        return NULL;
    *kept = ax;
    node->as.scan.block = xb;
    node->as.scan.axes = kept;
    node->as.scan.op = op;
    node->as.scan.exclusive = exclusive;
    return y;
}

/* The input's adjoint as a block (scan_formulas.h), then added into its
 * gradient through its layout. */
dc_status dc_scan_backward(dc_tape *tape, dc_node *node)
{
    dc_tensor *x = node->in[0];
    const dc_tensor *y = node->out[0], *xb = node->as.scan.block;
    const dc_axes *ax = node->as.scan.axes;
    const int op = (int)node->as.scan.op;
    const bool exclusive = node->as.scan.exclusive;
    const dc_tensor *g = dc_grad_contiguous(tape, y);
    void *gx = g ? dc_tape_alloc_data(tape, (size_t)(x->numel ? x->numel : 1) * dc_dtype_size(x->dtype)) : NULL;
    if (!gx)
        return DC_ERR_MEMORY;
    if (tape->ctx->cuda) {
        const size_t bytes = dc_cuda_scan_parts_bytes(ax->outer, ax->len, ax->inner, true);
        void *parts = bytes ? dc_tape_alloc_data(tape, bytes) : NULL;
        if (bytes && !parts)
            return DC_ERR_MEMORY;
        const dc_status st = dc_cuda_scan_adjoint(tape->ctx, x->dtype, op, exclusive, xb->data, y->data, g->data, gx,
                                                  ax->outer, ax->len, ax->inner, parts);
        if (st != DC_OK)
            return st;
    } else {
        const cpu_plan p = plan_cpu(op, exclusive, ax);
        const dc_status st = scan_cpu(tape, &p, x->dtype, true, xb->data, y->data, g->data, gx);
        if (st != DC_OK)
            return st;
    }
    return dc_axes_add_block_grad(tape, x, ax, gx);
}
