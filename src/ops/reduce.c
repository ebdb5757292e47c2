/* Sum and mean over axes. Both are one op, DC_OP_SUM, with a scale (1 for a
 * sum, 1/count for a mean): forward and adjoint are the same scaled copy,
 * the forward summing over the reduced axes, the adjoint broadcasting back. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "axes.h"
#include "backward.h"
#include "reduce_cpu.h"
#include "reduce_kinds.h"

/* y (ykeep: y read as the keepdims shape) the sum of x's elements times
 * scale over the reduced axes: DC_K_AFFINE with its output reduced
 * (dc_run_kernel), on any layout; the CUDA path (the CPU's is sum_block). */
static dc_status scale_and_sum(dc_ctx *ctx, dc_tensor *x, dc_tensor *ykeep, double scale)
{
    const dc_affine_arg arg = {scale, 0.0};
    dc_loop_in li;
    dc_loop_in_tensor(&li, x, x->ndim, x->shape);
    dc_loop_out lo;
    dc_loop_out_tensor(&lo, ykeep, x->ndim, x->shape, DC_WRITE_ASSIGN);
    return dc_run_kernel(ctx, DC_K_AFFINE, &arg, x->dtype, x->ndim, x->shape, 1, &li, 1, &lo);
}

/* y the sum over the reduced axes of x on the CPU: its [outer, len, inner]
 * block (ax; dc_axes_block, left in *block) read by dc_cpu_reduce_block. */
static dc_status sum_block(dc_tape *tape, const dc_tensor *x, const dc_axes *ax, dc_tensor *y, const dc_tensor **block)
{
    const size_t bytes = dc_cpu_reduce_scratch(ax->outer, ax->len, ax->inner);
    const dc_tensor *xb = dc_axes_block(tape, x, ax);
    void *scratch = xb && bytes ? dc_tape_alloc_meta(tape, bytes) : NULL;
    if (!xb || (bytes && !scratch))
        return DC_ERR_MEMORY;
    *block = xb;
    /* no nz or aux: a sum's adjoint reads neither */
    dc_cpu_reduce_block(tape->ctx, DC_RK_SUM, x->dtype, xb->data, ax->outer, ax->len, ax->inner, y->data, NULL, NULL,
                        scratch);
    return DC_OK;
}

/* y *= scale, y on the CPU, rounded once to its dtype. A float32 sum
 * rounded to infinity while its elements are finite (a mean of numbers
 * near 3e38) is taken again from the block xb in double and scaled before
 * it is rounded: the mean is in range. */
static void scale_outputs(dc_tensor *y, double scale, const dc_tensor *xb, const dc_axes *ax)
{
    for (int64_t i = 0; i < y->numel; ++i) {
        if (y->dtype == DC_F32) {
            float *yi = (float *)y->data + i;
            if (isinf(*yi)) {
                const float *col = (const float *)xb->data + i / ax->inner * ax->len * ax->inner + i % ax->inner;
                double s = 0;
                for (int64_t l = 0; l < ax->len; ++l)
                    s += (double)col[l * ax->inner];
                *yi = (float)(s * scale);
            } else {
                *yi = (float)((double)*yi * scale);
            }
        } else {
            ((double *)y->data)[i] *= scale;
        }
    }
}

static dc_tensor *reduce(dc_tape *tape, const char *op, dc_tensor *x, int n_axes, const int *axes, bool keepdims,
                         bool mean)
{
    const char *const labels[] = {"x"};
    if (dc_op_check_args(tape, op, 1, &x, labels) != DC_OK)
        return NULL;
    dc_ctx *ctx = tape->ctx;
    dc_axes ax;
    if (dc_axes_parse(ctx, op, x, n_axes, axes, keepdims, &ax) != DC_OK)
        return NULL;
    const int64_t count = ax.len;
    dc_tensor *y = dc_tape_alloc_tensor(tape, x->dtype, ax.out_ndim, ax.out_shape);
    if (!y)
        return NULL;
    /* y read as the keepdims shape: same memory, size 1 on reduced axes. */
    dc_tensor ykeep = *y;
    ykeep.ndim = x->ndim;
    memcpy(ykeep.shape, ax.kept_shape, sizeof ax.kept_shape);
    dc_contiguous_strides(x->ndim, ax.kept_shape, ykeep.strides);

    const double scale = mean ? (count > 0 ? 1.0 / (double)count : NAN) : 1.0;
    if (!ctx->cuda) {
        /* on the CPU the reductions' kernel, which reads x once where it lies
         * as the block (else a copy laid out so) and sums in pieces of a
         * fixed size: the same bits on any number of threads (reduce.h), as
         * the loop engine's per-thread sums are not; a mean is the sum
         * times the scale */
        const dc_tensor *xb = NULL;
        if (sum_block(tape, x, &ax, y, &xb) != DC_OK)
            return NULL;
        if (mean && count > 0)
            scale_outputs(y, scale, xb, &ax);
    } else if (scale_and_sum(ctx, x, &ykeep, scale) != DC_OK) {
        return NULL;
    }
    if (mean && count == 0 && dc_tensor_fill(y, NAN) != DC_OK) /* the mean of nothing */
        return NULL;

    if (dc_tape_wants_node(tape, 1, &x)) {
        dc_node *node = dc_tape_record(tape, DC_OP_SUM, 1, &x, 1, &y);
        if (!node)
            return NULL;
        node->as.sum.scale = scale;
        node->as.sum.axes = ax.mask;
    }
    return y;
}

/* The calling thread's number in its team, and the team's size. */
static void thread_in_team(int64_t *t, int64_t *nt)
{
#ifdef _OPENMP
    *t = omp_get_thread_num();
    *nt = omp_get_num_threads();
#else
    *t = 0;
    *nt = 1;
#endif
}

/* The sum's adjoint on the CPU where the reduced axes are one run of x and
 * x's first gradient is assigned and contiguous: gx, x's [outer, len,
 * inner] block, gets gy ([outer, inner]) times scale repeated along len,
 * each value rounded as DC_K_AFFINE rounds gy * scale + 0 (the same bits).
 * Written in runs, each thread its share of the block's rows, where the
 * loop engine staged every row of a short inner axis through a tile. */
#define DEFINE_SUM_ADJOINT(T, SFX)                                                                                     \
    static void sum_adjoint_##SFX(int n_threads, const T *g, T scale, int64_t outer, int64_t len, int64_t inner,       \
                                  T *gx)                                                                               \
    {                                                                                                                  \
        const int64_t rows = outer * len;                                                                              \
        _Pragma("omp parallel num_threads(n_threads)")                                                                 \
        {                                                                                                              \
            int64_t t, nt;                                                                                             \
            thread_in_team(&t, &nt);                                                                                   \
            const int64_t r1 = rows * (t + 1) / nt;                                                                    \
            int64_t r = rows * t / nt, o = len ? r / len : 0;                                                          \
            for (; r < r1; ++o) {                                                                                      \
                /* the rows of output row o in this share: one value each                                              \
                 * where inner is 1, else a copy of gy's row o */                                                      \
                const int64_t end = (o + 1) * len < r1 ? (o + 1) * len : r1;                                           \
                const T *gr = g + o * inner;                                                                           \
                if (inner == 1) {                                                                                      \
                    const T v = gr[0] * scale + (T)0;                                                                  \
                    for (int64_t i = r; i < end; ++i)                                                                  \
                        gx[i] = v;                                                                                     \
                } else {                                                                                               \
                    for (int64_t i = r; i < end; ++i)                                                                  \
                        for (int64_t c = 0; c < inner; ++c)                                                            \
                            gx[i * inner + c] = gr[c] * scale + (T)0;                                                  \
                }                                                                                                      \
                r = end;                                                                                               \
            }                                                                                                          \
        }                                                                                                              \
    }
DEFINE_SUM_ADJOINT(float, f32)
DEFINE_SUM_ADJOINT(double, f64)

/* dc_sum_backward's direct path, where it applies (see sum_adjoint). */
static bool sum_adjoint_direct(dc_tape *tape, dc_tensor *x, const dc_tensor *g, unsigned axes, double scale,
                               dc_status *st)
{
    int first = -1, last = -1;
    for (int d = 0; d < x->ndim; ++d)
        if ((axes >> d) & 1u) {
            if (first < 0)
                first = d;
            else if (last != d - 1)
                return false; /* not one run */
            last = d;
        }
    if (first < 0)
        return false;
    dc_write_mode mode;
    *st = dc_grad_prepare(tape, x, &mode);
    if (*st != DC_OK)
        return true;
    if (mode != DC_WRITE_ASSIGN || !dc_tensor_is_contiguous(x->grad))
        return false;
    int64_t outer = 1, len = 1, inner = 1;
    for (int d = 0; d < x->ndim; ++d)
        *(d < first ? &outer : d <= last ? &len : &inner) *= x->shape[d];
    const int n_threads = x->numel > 32768 ? tape->ctx->cpu.num_threads : 1;
    if (x->dtype == DC_F32)
        sum_adjoint_f32(n_threads, g->data, (float)scale, outer, len, inner, x->grad->data);
    else
        sum_adjoint_f64(n_threads, g->data, scale, outer, len, inner, x->grad->data);
    dc_grad_done(x);
    return true;
}

dc_status dc_sum_backward(dc_tape *tape, dc_node *node)
{
    dc_tensor *x = node->in[0];
    const dc_tensor *g = dc_grad_contiguous(tape, node->out[0]);
    if (!g)
        return DC_ERR_MEMORY;
    if (g->numel == 1 && !tape->ctx->cuda) {
        /* every element reduced: x's first gradient is one value everywhere,
         * written in one pass (dc_cpu_fill) rather than broadcast by the loop
         * engine; a gradient already holding values takes that path */
        dc_write_mode mode;
        const dc_status st = dc_grad_prepare(tape, x, &mode);
        if (st != DC_OK)
            return st;
        if (mode == DC_WRITE_ASSIGN && dc_tensor_is_contiguous(x->grad)) {
            /* rounded as DC_K_AFFINE rounds gy * scale + 0 (the same bits) */
            double v;
            if (x->dtype == DC_F32)
                v = *(const float *)g->data * (float)node->as.sum.scale + 0.0f;
            else
                v = *(const double *)g->data * node->as.sum.scale + 0.0;
            dc_cpu_fill(tape->ctx, x->dtype, x->grad->data, x->numel, v);
            dc_grad_done(x);
            return DC_OK;
        }
    }
    dc_status st = DC_OK;
    if (!tape->ctx->cuda && g->numel > 1 && sum_adjoint_direct(tape, x, g, node->as.sum.axes, node->as.sum.scale, &st))
        return st;
    dc_tensor gkeep = *g;
    gkeep.ndim = x->ndim;
    for (int d = 0; d < x->ndim; ++d)
        gkeep.shape[d] = (node->as.sum.axes >> d) & 1u ? 1 : x->shape[d];
    dc_contiguous_strides(x->ndim, gkeep.shape, gkeep.strides);
    const dc_affine_arg arg = {node->as.sum.scale, 0.0};
    const dc_tensor *reads[1] = {&gkeep};
    return dc_backward_kernel(tape, DC_K_AFFINE, &arg, x->ndim, x->shape, 1, reads, 1, &x);
}

dc_tensor *dc_op_sum(dc_tape *tape, dc_tensor *x, int n_axes, const int *axes, bool keepdims)
{
    return reduce(tape, "dc_op_sum", x, n_axes, axes, keepdims, false);
}

dc_tensor *dc_op_mean(dc_tape *tape, dc_tensor *x, int n_axes, const int *axes, bool keepdims)
{
    return reduce(tape, "dc_op_mean", x, n_axes, axes, keepdims, true);
}

const char *dc_reduction_name(dc_reduction op)
{
    switch (op) {
    case DC_REDUCE_SUM:
        return "sum";
    case DC_REDUCE_PROD:
        return "prod";
    case DC_REDUCE_MAX:
        return "max";
    case DC_REDUCE_MIN:
        return "min";
    }
    return "unknown";
}
