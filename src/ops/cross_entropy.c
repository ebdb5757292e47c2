/* Cross entropy of logits against class indices, with the log-softmax fused
 * in: one pass per row finds the maximum, the log of the sum of terms and
 * the loss; the adjoint recomputes softmax from the saved maximum and log
 * (each row's pair, lse[2 r] and lse[2 r + 1]). */
#include <math.h>
#include <string.h>

#include "../../broadcast/pp.h"
#include "../../dual/scalar_math.h"
#include "../cuda/nn_cuda.h"
#include "backward.h"
#include "indices.h"

/* The element formulas (model_formulas.h), shared with the device. */
#define DC_S float
#define DC_SFX f32
#include "model_formulas.h"
#undef DC_S
#undef DC_SFX
#define DC_S double
#define DC_SFX f64
#include "model_formulas.h"
#undef DC_S
#undef DC_SFX

#define DEFINE_CE(T, SFX)                                                                          \
    /* loss of row r; stores its maximum and log of the sum of terms */                            \
    static double ce_row_##SFX(const T *restrict l, int64_t c, int64_t target, double *lse)        \
    {                                                                                              \
        T m = l[0];                                                                                \
        for (int64_t k = 1; k < c; ++k)                                                            \
            m = l[k] > m ? l[k] : m;                                                               \
        double s = 0;                                                                              \
        _Pragma("omp simd reduction(+ : s)") for (int64_t k = 0; k < c; ++k) s +=                  \
            (double)dc_mf_softmax_term_##SFX(l[k], m);                                             \
        lse[0] = (double)m;                                                                        \
        lse[1] = log(s);                                                                           \
        return dc_mf_cross_entropy_loss_##SFX(l[target], lse[0], lse[1]);                          \
    }                                                                                              \
    static void ce_grad_row_##SFX(T *restrict g, int64_t cs, const T *restrict l, int64_t c,       \
                                  int64_t target, const double *lse, T scale, bool add)            \
    {                                                                                              \
        for (int64_t k = 0; k < c; ++k) {                                                          \
            const T v = dc_mf_cross_entropy_grad_##SFX(l[k], lse[0], lse[1], k == target, scale);  \
            g[k * cs] = add ? g[k * cs] + v : v;                                                   \
        }                                                                                          \
    }
DEFINE_CE(float, f32)
DEFINE_CE(double, f64)

dc_tensor *dc_op_cross_entropy(dc_tape *tape, dc_tensor *logits, dc_tensor *targets)
{
    const char *const labels[] = {"logits", "targets"};
    dc_tensor *in[2] = {logits, targets};
    if (dc_op_check_args(tape, "dc_op_cross_entropy", 2, in, labels) != DC_OK)
        return NULL;
    dc_ctx *ctx = tape->ctx;
    char sl[128], st_[128];
    if (logits->ndim != 2 || targets->ndim != 1 || targets->shape[0] != logits->shape[0]) {
        dc_error(ctx, DC_ERR_SHAPE, "dc_op_cross_entropy: logits %s and targets %s; want [N, C] and [N]",
                 dc_tensor_shape_str(logits, sl, sizeof sl), dc_tensor_shape_str(targets, st_, sizeof st_));
        return NULL;
    }
    if (targets->dtype != logits->dtype) {
        dc_error(ctx, DC_ERR_DTYPE, "dc_op_cross_entropy: logits are %s but targets are %s",
                 dc_dtype_name(logits->dtype), dc_dtype_name(targets->dtype));
        return NULL;
    }
    const int64_t n = logits->shape[0], c = logits->shape[1];
    if (c == 0 && n > 0) {
        dc_error(ctx, DC_ERR_SHAPE, "dc_op_cross_entropy: logits have no classes");
        return NULL;
    }
    const int64_t *t = dc_read_indices(tape, "dc_op_cross_entropy", "targets", DC_SITE_CROSS_ENTROPY_TARGETS, targets, c);
    dc_tensor *x = logits;
    if (t && !dc_tensor_is_contiguous(x)) {
        x = dc_tape_alloc_tensor(tape, logits->dtype, 2, logits->shape);
        if (x && dc_tensor_copy(x, logits) != DC_OK)
            x = NULL;
    }
    /* per row its maximum and log of the sum of terms, then per row its
     * loss, where kernels read them */
    const size_t rows_bytes = (size_t)(n ? n : 1) * sizeof(double);
    double *lse = (t && x) ? (ctx->cuda ? dc_tape_alloc_data(tape, 3 * rows_bytes)
                                        : dc_tape_alloc_meta(tape, 3 * rows_bytes))
                           : NULL;
    dc_tensor *y = lse ? dc_tape_alloc_tensor(tape, logits->dtype, 0, NULL) : NULL;
    if (!y)
        return NULL;
    if (ctx->cuda) {
        if (dc_cuda_cross_entropy(ctx, logits->dtype, x->data, n, c, t, lse, lse + 2 * (n ? n : 1), y->data) != DC_OK)
            return NULL;
    } else {
        double *row_loss = lse + 2 * (n ? n : 1);
        const int n_threads = n * c > 32768 ? ctx->cpu.num_threads : 1;
#pragma omp parallel for num_threads(n_threads) schedule(static)
        for (int64_t r = 0; r < n; ++r)
            row_loss[r] = logits->dtype == DC_F32 ? ce_row_f32((const float *)x->data + r * c, c, t[r], &lse[2 * r])
                                                  : ce_row_f64((const double *)x->data + r * c, c, t[r], &lse[2 * r]);
        /* added in row order: the same loss on any number of threads */
        double total = 0;
        for (int64_t r = 0; r < n; ++r)
            total += row_loss[r];
        const double mean = n ? total / (double)n : NAN;
        if (logits->dtype == DC_F32)
            *(float *)y->data = (float)mean;
        else
            *(double *)y->data = mean;
    }
    if (!dc_tape_wants_node(tape, 1, &logits))
        return y;
    dc_node *node = dc_tape_record(tape, DC_OP_CROSS_ENTROPY, 2, in, 1, &y);
    if (!node)
        return NULL;
    node->as.cross_entropy.lse = lse;
    node->as.cross_entropy.targets = t;
    node->as.cross_entropy.logits = x;
    return y;
}

/* d loss / d logits[r, k] = gy / N * (softmax[r, k] - [k == target_r]) */
dc_status dc_cross_entropy_backward(dc_tape *tape, dc_node *node)
{
    dc_tensor *logits = node->in[0];
    const dc_tensor *y = node->out[0];
    const double *lse = node->as.cross_entropy.lse;
    const int64_t *t = node->as.cross_entropy.targets;
    const dc_tensor *x = node->as.cross_entropy.logits;
    dc_write_mode mode;
    dc_status st = dc_grad_prepare(tape, logits, &mode);
    if (st != DC_OK)
        return st;
    const int64_t n = logits->shape[0], c = logits->shape[1];
    /* the gradient may be a view into a wider tensor's (sliced logits) */
    dc_tensor *g = logits->grad;
    const int64_t rs = g->strides[0], cs = g->strides[1];
    if (tape->ctx->cuda) {
        st = dc_cuda_cross_entropy_grad(tape->ctx, logits->dtype, g->data, rs, cs, x->data, n, c, t, lse,
                                        y->grad->data, mode == DC_WRITE_ACCUMULATE);
        if (st == DC_OK)
            dc_grad_done(logits);
        return st;
    }
    double gy;
    st = dc_tensor_item(y->grad, &gy);
    if (st != DC_OK)
        return st;
    const double scale = n ? gy / (double)n : 0.0;
    const bool add = mode == DC_WRITE_ACCUMULATE;
    const int n_threads = n * c > 32768 ? tape->ctx->cpu.num_threads : 1;
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int64_t r = 0; r < n; ++r) {
        if (logits->dtype == DC_F32)
            ce_grad_row_f32((float *)g->data + r * rs, cs, (const float *)x->data + r * c, c, t[r], &lse[2 * r],
                            (float)scale, add);
        else
            ce_grad_row_f64((double *)g->data + r * rs, cs, (const double *)x->data + r * c, c, t[r], &lse[2 * r],
                            scale, add);
    }
    dc_grad_done(logits);
    return DC_OK;
}
