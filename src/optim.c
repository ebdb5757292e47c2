/* Adam and SGD with momentum, and gradient clipping, over persistent
 * parameters (CPU; the update is one vectorized pass per parameter). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../dual/scalar_math.h"
#include "../broadcast/pp.h"
#include "cuda/nn_cuda.h"
#include "internal.h"

typedef enum { OPT_ADAM, OPT_SGD } opt_kind;

struct dc_optimizer {
    dc_ctx *ctx;
    opt_kind kind;
    int n;
    dc_tensor **params;
    dc_tensor **m; /* Adam first moment, or SGD momentum buffer */
    dc_tensor **v; /* Adam second moment */
    dc_adam_options adam;
    double lr, momentum;
    int64_t *steps; /* updates each parameter received: Adam's bias correction */
    /* CUDA: the learning rate, then each parameter's slots (DC_OPT_SLOTS
     * doubles: its step count and coefficients), in device memory: a
     * captured step reads them there, so that it replays with this step's
     * values, not those of the step it was captured from */
    double *device;
};

dc_adam_options dc_adam_options_default(void)
{
    dc_adam_options o = {1e-3, 0.9, 0.999, 1e-8, 0.0};
    return o;
}

void dc_optimizer_free(dc_optimizer *opt)
{
    if (!opt)
        return;
    for (int i = 0; i < opt->n; ++i) {
        if (opt->m)
            dc_tensor_free(opt->m[i]);
        if (opt->v)
            dc_tensor_free(opt->v[i]);
    }
    if (opt->device)
        dc_mem_free(opt->ctx, opt->device);
    free(opt->params);
    free(opt->steps);
    free(opt->m);
    free(opt->v);
    free(opt);
}

static dc_optimizer *make(dc_ctx *ctx, opt_kind kind, int n, dc_tensor *const *params, const char *fn)
{
    if (!ctx)
        return NULL;
    if (n <= 0 || !params) {
        dc_error(ctx, DC_ERR_ARG, "%s: needs at least one parameter", fn);
        return NULL;
    }
    for (int i = 0; i < n; ++i) {
        if (!params[i]) {
            dc_error(ctx, DC_ERR_ARG, "%s: parameter %d is NULL", fn, i);
            return NULL;
        }
        if (params[i]->tape || !dc_tensor_is_contiguous(params[i])) {
            dc_error(ctx, DC_ERR_ARG, "%s: parameter %d must be a persistent, contiguous tensor", fn, i);
            return NULL;
        }
        if (params[i]->ctx != ctx) {
            dc_error(ctx, DC_ERR_ARG, "%s: parameter %d belongs to another context", fn, i);
            return NULL;
        }
    }
    const int again = dc_tensors_repeated(ctx, n, params);
    if (again >= 0) {
        dc_error(ctx, DC_ERR_ARG, "%s: parameter %d is given twice (it would be updated twice a step)", fn, again);
        return NULL;
    }
    dc_optimizer *opt = calloc(1, sizeof *opt);
    if (!opt || !(opt->params = calloc((size_t)n, sizeof *opt->params)) ||
        !(opt->steps = calloc((size_t)n, sizeof *opt->steps)) ||
        !(opt->m = calloc((size_t)n, sizeof *opt->m)) ||
        (kind == OPT_ADAM && !(opt->v = calloc((size_t)n, sizeof *opt->v)))) {
        dc_optimizer_free(opt);
        dc_error(ctx, DC_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    opt->ctx = ctx;
    opt->kind = kind;
    opt->n = n;
    memcpy(opt->params, params, (size_t)n * sizeof *params);
    for (int i = 0; i < n; ++i) {
        opt->m[i] = dc_tensor_new(ctx, params[i]->dtype, params[i]->ndim, params[i]->shape);
        if (kind == OPT_ADAM)
            opt->v[i] = dc_tensor_new(ctx, params[i]->dtype, params[i]->ndim, params[i]->shape);
        if (!opt->m[i] || (kind == OPT_ADAM && !opt->v[i])) {
            dc_optimizer_free(opt);
            return NULL;
        }
    }
    return opt;
}

/* CUDA: the optimizer's device state (see dc_optimizer.device): the
 * learning rate, and zero steps for every parameter. */
static dc_status device_state(dc_optimizer *opt, const char *fn)
{
    if (!opt->ctx->cuda)
        return DC_OK;
    const size_t bytes = (size_t)(1 + DC_OPT_SLOTS * opt->n) * sizeof(double);
    opt->device = dc_mem_alloc(opt->ctx, bytes);
    if (!opt->device)
        return dc_error(opt->ctx, DC_ERR_MEMORY, "%s: out of device memory for %zu bytes", fn, bytes);
    dc_status st = dc_mem_zero(opt->ctx, opt->device, bytes);
    return st == DC_OK ? dc_mem_from_host(opt->ctx, opt->device, &opt->lr, sizeof opt->lr) : st;
}

/* A learning rate or weight decay: finite and not negative (NaN is not). */
static bool rate_ok(double v) { return v >= 0 && v < INFINITY; }

dc_optimizer *dc_optimizer_adam(dc_ctx *ctx, int n, dc_tensor *const *params, const dc_adam_options *options)
{
    const dc_adam_options o = options ? *options : dc_adam_options_default();
    if (ctx && !(rate_ok(o.lr) && o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1 && o.eps > 0 &&
                 o.eps < INFINITY && rate_ok(o.weight_decay))) {
        dc_error(ctx, DC_ERR_ARG, "dc_optimizer_adam: lr %g, betas %g %g, eps %g, weight decay %g out of range",
                 o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
        return NULL;
    }
    dc_optimizer *opt = make(ctx, OPT_ADAM, n, params, "dc_optimizer_adam");
    if (opt) {
        opt->adam = o;
        opt->lr = o.lr;
        if (device_state(opt, "dc_optimizer_adam") != DC_OK) {
            dc_optimizer_free(opt);
            return NULL;
        }
    }
    return opt;
}

dc_optimizer *dc_optimizer_sgd(dc_ctx *ctx, int n, dc_tensor *const *params, double lr, double momentum)
{
    if (ctx && !(rate_ok(lr) && momentum >= 0 && momentum < 1)) {
        dc_error(ctx, DC_ERR_ARG, "dc_optimizer_sgd: lr %g or momentum %g out of range", lr, momentum);
        return NULL;
    }
    dc_optimizer *opt = make(ctx, OPT_SGD, n, params, "dc_optimizer_sgd");
    if (opt) {
        opt->lr = lr;
        opt->momentum = momentum;
        if (device_state(opt, "dc_optimizer_sgd") != DC_OK) {
            dc_optimizer_free(opt);
            return NULL;
        }
    }
    return opt;
}

void dc_optimizer_set_lr(dc_optimizer *opt, double lr)
{
    if (!opt)
        return;
    if (!rate_ok(lr)) { /* the constructors' rule */
        dc_error(opt->ctx, DC_ERR_ARG, "dc_optimizer_set_lr: learning rate %g is negative, infinite or NaN; it stays %g",
                 lr, opt->lr);
        return;
    }
    opt->lr = lr;
    /* written by a kernel: no host wait, and in stream order with the
     * steps (and graph replays) queued before and after */
    if (opt->device)
        dc_cuda_fill(opt->ctx, DC_F64, opt->device, 1, lr);
}

double dc_optimizer_lr(const dc_optimizer *opt) { return opt ? opt->lr : 0.0; }

void dc_optimizer_zero_grad(dc_optimizer *opt)
{
    for (int i = 0; opt && i < opt->n; ++i)
        dc_tensor_zero_grad(opt->params[i]);
}

/* Elements from which an update or a sum is split over the threads. */
#define PARALLEL_MIN 65536

/* The element formulas (model_formulas.h), shared with the device. */
#define DC_S float
#define DC_SFX f32
#include "ops/model_formulas.h"
#undef DC_S
#undef DC_SFX
#define DC_S double
#define DC_SFX f64
#include "ops/model_formulas.h"
#undef DC_S
#undef DC_SFX

#define DEFINE_UPDATES(T, SFX)                                                                     \
    static void adam_##T(int n_threads, int64_t n, T *restrict w, const T *restrict g, T *restrict m, \
                         T *restrict v, T lr_t, T b1, T b2, T eps_t, T decay)                      \
    {                                                                                              \
        _Pragma("omp parallel for simd num_threads(n_threads) if (n > PARALLEL_MIN) schedule(static)") \
        for (int64_t e = 0; e < n; ++e)                                                            \
            w[e] = dc_mf_adam_##SFX(w[e], g[e], &m[e], &v[e], lr_t, b1, b2, eps_t, decay);         \
    }                                                                                              \
    static void sgd_##T(int n_threads, int64_t n, T *restrict w, const T *restrict g, T *restrict buf, T lr, \
                        T mu)                                                                      \
    {                                                                                              \
        _Pragma("omp parallel for simd num_threads(n_threads) if (n > PARALLEL_MIN) schedule(static)") \
        for (int64_t e = 0; e < n; ++e)                                                            \
            w[e] = dc_mf_sgd_##SFX(w[e], g[e], &buf[e], lr, mu);                                   \
    }
DEFINE_UPDATES(float, f32)
DEFINE_UPDATES(double, f64)

/* Parameter i's gradient through *g (NULL where none reached it): refused
 * when it is a view, which the updates cannot walk. */
static dc_status gradient_of(dc_optimizer *opt, int i, const dc_tensor **g)
{
    *g = dc_tensor_grad(opt->params[i]);
    if (*g && !dc_tensor_is_contiguous(*g))
        return dc_error(opt->ctx, DC_ERR_ARG, "dc_optimizer_step: the gradient of parameter %d is a view", i);
    return DC_OK;
}

/* The updates of a run of parameters of one dtype, queued together. */
static dc_status flush_updates(dc_optimizer *opt, dc_dtype dtype, int n, const dc_cuda_update *u)
{
    if (n == 0)
        return DC_OK;
    return opt->kind == OPT_ADAM ? dc_cuda_adam(opt->ctx, dtype, n, u, opt->device, opt->adam.beta1, opt->adam.beta2,
                                                opt->adam.eps, opt->adam.weight_decay)
                                 : dc_cuda_sgd(opt->ctx, dtype, n, u, opt->device, opt->momentum);
}

/* dc_optimizer_step on CUDA: the step counts and coefficients advance on
 * the device, and the parameters with a gradient are updated a batch of
 * DC_CUDA_UPDATES_PER_LAUNCH at a time (one run of a dtype each), not one
 * launch each. */
static dc_status step_on_device(dc_optimizer *opt)
{
    dc_cuda_update batch[DC_CUDA_UPDATES_PER_LAUNCH];
    int queued = 0;
    dc_dtype dtype = DC_F32;
    for (int i = 0; i < opt->n; ++i) {
        dc_tensor *w = opt->params[i];
        const dc_tensor *g;
        const dc_status found = gradient_of(opt, i, &g);
        if (found != DC_OK)
            return found;
        if (!g)
            continue;
        ++opt->steps[i];
        if (queued == DC_CUDA_UPDATES_PER_LAUNCH || (queued > 0 && w->dtype != dtype)) {
            const dc_status st = flush_updates(opt, dtype, queued, batch);
            if (st != DC_OK)
                return st;
            queued = 0;
        }
        dtype = w->dtype;
        batch[queued++] = (dc_cuda_update){w->numel,
                                           w->data,
                                           g->data,
                                           opt->m[i]->data,
                                           opt->kind == OPT_ADAM ? opt->v[i]->data : NULL,
                                           opt->device + 1 + DC_OPT_SLOTS * i};
    }
    return flush_updates(opt, dtype, queued, batch);
}

dc_status dc_optimizer_step(dc_optimizer *opt)
{
    if (!opt)
        return DC_ERR_ARG;
    opt->ctx->api = "dc_optimizer_step";
    dc_capture_note_op(opt->ctx, "dc_optimizer_step", opt->n, opt->params);
    dc_capture_note_op(opt->ctx, "dc_optimizer_step", opt->n, opt->m);
    const double b1 = opt->adam.beta1, b2 = opt->adam.beta2;
    const double decay = opt->lr * opt->adam.weight_decay;
    if (opt->ctx->cuda)
        return step_on_device(opt);
    for (int i = 0; i < opt->n; ++i) {
        dc_tensor *w = opt->params[i];
        const dc_tensor *g;
        const dc_status found = gradient_of(opt, i, &g);
        if (found != DC_OK)
            return found;
        if (!g)
            continue;
        /* Bias correction, folded into the step size and epsilon, counts
         * the updates this parameter received. */
        const int64_t t = ++opt->steps[i];
        const double c1 = 1.0 - pow(b1, (double)t), c2 = 1.0 - pow(b2, (double)t);
        const double lr_t = opt->lr * sqrt(c2) / c1, eps_t = opt->adam.eps * sqrt(c2);
        const int64_t n = w->numel;
        const int nt = opt->ctx->cpu.num_threads;
        if (opt->kind == OPT_ADAM) {
            if (w->dtype == DC_F32)
                adam_float(nt, n, w->data, g->data, opt->m[i]->data, opt->v[i]->data, (float)lr_t, (float)b1,
                           (float)b2, (float)eps_t, (float)decay);
            else
                adam_double(nt, n, w->data, g->data, opt->m[i]->data, opt->v[i]->data, lr_t, b1, b2, eps_t, decay);
        } else {
            if (w->dtype == DC_F32)
                sgd_float(nt, n, w->data, g->data, opt->m[i]->data, (float)opt->lr, (float)opt->momentum);
            else
                sgd_double(nt, n, w->data, g->data, opt->m[i]->data, opt->lr, opt->momentum);
        }
    }
    return DC_OK;
}

/* The clip's passes over one gradient of n elements:
 * - sum_squares: the sum of the squares of the elements times scale, in
 *   double, in SUM_BLOCKS fixed blocks added in block order (the same result
 *   on any number of threads);
 * - max_abs: the largest magnitude;
 * - scale: each element times s, the product in double (a float32 scale may
 *   underflow where the scaled elements do not). */
enum { SUM_BLOCKS = 64 };
#define DEFINE_CLIP_PASSES(T)                                                                                          \
    static double sum_squares_##T(const T *x, int64_t n, double scale, int n_threads)                                 \
    {                                                                                                                 \
        double part[SUM_BLOCKS];                                                                                      \
        _Pragma("omp parallel for num_threads(n_threads) if (n > PARALLEL_MIN) schedule(static)")                     \
        for (int b = 0; b < SUM_BLOCKS; ++b) {                                                                        \
            const int64_t e0 = n * b / SUM_BLOCKS, e1 = n * (b + 1) / SUM_BLOCKS;                                     \
            double s = 0;                                                                                             \
            _Pragma("omp simd reduction(+ : s)")                                                                      \
            for (int64_t e = e0; e < e1; ++e) {                                                                       \
                const double v = (double)x[e] * scale;                                                                \
                s += v * v;                                                                                           \
            }                                                                                                         \
            part[b] = s;                                                                                              \
        }                                                                                                             \
        double total = 0;                                                                                             \
        for (int b = 0; b < SUM_BLOCKS; ++b)                                                                          \
            total += part[b];                                                                                         \
        return total;                                                                                                 \
    }                                                                                                                 \
    static double max_abs_##T(const T *x, int64_t n, int n_threads)                                                   \
    {                                                                                                                 \
        double m = 0;                                                                                                 \
        /* no simd: fmax's NaN rule keeps clang from vectorizing it (a pass that only runs where a norm overflows) */ \
        _Pragma("omp parallel for num_threads(n_threads) if (n > PARALLEL_MIN) reduction(max : m)")                   \
        for (int64_t e = 0; e < n; ++e)                                                                               \
            m = fmax(m, fabs((double)x[e]));                                                                          \
        return m;                                                                                                     \
    }                                                                                                                 \
    static void scale_##T(T *x, int64_t n, double s, int n_threads)                                                   \
    {                                                                                                                 \
        _Pragma("omp parallel for simd num_threads(n_threads) if (n > PARALLEL_MIN) schedule(static)")                \
        for (int64_t e = 0; e < n; ++e)                                                                               \
            x[e] = (T)((double)x[e] * s);                                                                             \
    }
DEFINE_CLIP_PASSES(float)
DEFINE_CLIP_PASSES(double)

/* What grad_reduce computes over the gradients. */
typedef enum { DC_GRAD_SUM_SQUARES, DC_GRAD_MAX_ABS } dc_grad_reduction;

/* The reduction `kind` over every gradient of params[0..n) (CPU; CUDA runs
 * the same passes on the device, dc_cuda_clip): the sum of the squares of
 * the elements times scale, or the largest magnitude. */
static dc_status grad_reduce(dc_ctx *ctx, int n, dc_tensor *const *params, dc_grad_reduction kind, double scale,
                             double *out)
{
    double r = 0;
    for (int i = 0; i < n; ++i) {
        const dc_tensor *g = dc_tensor_grad(params[i]);
        if (!g)
            continue;
        const int nt = ctx->cpu.num_threads;
        if (kind == DC_GRAD_MAX_ABS)
            r = fmax(r, g->dtype == DC_F32 ? max_abs_float(g->data, g->numel, nt) : max_abs_double(g->data, g->numel, nt));
        else
            r += g->dtype == DC_F32 ? sum_squares_float(g->data, g->numel, scale, nt)
                                    : sum_squares_double(g->data, g->numel, scale, nt);
    }
    *out = r;
    return DC_OK;
}

/* The global L2 norm of the gradients. Squares of float64 elements beyond
 * about 1e154 overflow a double and those below about 1e-154 lose precision
 * or vanish; when the plain sum is infinite or below the smallest normal
 * double, the elements are summed again scaled by the power of two that
 * brings the largest magnitude into [0.5, 1). */
static dc_status global_norm(dc_ctx *ctx, int n, dc_tensor *const *params, double *norm)
{
    double total;
    dc_status st = grad_reduce(ctx, n, params, DC_GRAD_SUM_SQUARES, 1.0, &total);
    if (st != DC_OK)
        return st;
    if (!(isinf(total) || total < DBL_MIN)) { /* finite and normal, or NaN */
        *norm = sqrt(total);
        return DC_OK;
    }
    double largest;
    st = grad_reduce(ctx, n, params, DC_GRAD_MAX_ABS, 1.0, &largest);
    if (st != DC_OK)
        return st;
    if (largest == 0 || isinf(largest)) {
        *norm = largest;
        return DC_OK;
    }
    int e;
    frexp(largest, &e);
    /* 2^1022 at most (2^-e overflows for a subnormal largest element), which
     * already brings the squares of the subnormals into the normal range */
    const int shift = -e > 1022 ? 1022 : -e;
    st = grad_reduce(ctx, n, params, DC_GRAD_SUM_SQUARES, ldexp(1.0, shift), &total);
    if (st != DC_OK)
        return st;
    *norm = ldexp(sqrt(total), -shift);
    return DC_OK;
}

dc_status dc_clip_grad_norm(dc_ctx *ctx, int n, dc_tensor *const *params, double max_norm, double *norm)
{
    if (!ctx)
        return DC_ERR_ARG;
    if (n < 0)
        return dc_error(ctx, DC_ERR_ARG, "dc_clip_grad_norm: n is %d; give 0 or more tensors", n);
    if (n > 0 && !params)
        return dc_error(ctx, DC_ERR_ARG, "dc_clip_grad_norm: params is NULL for %d tensors", n);
    if (!(max_norm > 0))
        return dc_error(ctx, DC_ERR_ARG, "dc_clip_grad_norm: max_norm %g is not positive", max_norm);
    for (int i = 0; i < n; ++i) {
        if (!params[i])
            return dc_error(ctx, DC_ERR_ARG, "dc_clip_grad_norm: tensor %d is NULL", i);
        if (params[i]->ctx != ctx)
            return dc_error(ctx, DC_ERR_ARG, "dc_clip_grad_norm: tensor %d belongs to another context", i);
        char what[32];
        snprintf(what, sizeof what, "tensor %d", i);
        dc_status st = dc_tensor_check_live(params[i], "dc_clip_grad_norm", what);
        if (st != DC_OK)
            return st;
        /* a slice's gradient lies in its base's, and an output's may be the
         * adjoint given to dc_backward_with: contiguous or not, scaling
         * them would scale another tensor's numbers (twice, with its own) */
        const dc_tensor *g = dc_tensor_grad(params[i]);
        if (g && (params[i]->grad_in_base || !g->is_grad || !dc_tensor_is_contiguous(g)))
            return dc_error(ctx, DC_ERR_ARG,
                            "dc_clip_grad_norm: the gradient of tensor %d is a view (of a slice's base's gradient, or "
                            "of the adjoint given to dc_backward_with)",
                            i);
    }
    const int again = dc_tensors_repeated(ctx, n, params);
    if (again >= 0)
        return dc_error(ctx, DC_ERR_ARG,
                        "dc_clip_grad_norm: tensor %d is given twice (its gradient would count twice in the norm)",
                        again);
    ctx->api = "dc_clip_grad_norm";
    dc_capture_note_op(ctx, norm ? "dc_clip_grad_norm (norm read)" : "dc_clip_grad_norm", n, params);
    if (ctx->cuda) {
        /* on the device; the host waits only where the caller asks for the norm */
        const double *dev_norm = NULL;
        dc_status st = dc_cuda_clip(ctx, n, params, max_norm, &dev_norm);
        if (st == DC_OK && norm)
            st = dc_mem_to_host(ctx, norm, dev_norm, sizeof *norm);
        return st;
    }
    double global;
    dc_status st = global_norm(ctx, n, params, &global);
    if (st != DC_OK)
        return st;
    if (norm)
        *norm = global;
    /* NaN fails the comparison; an infinite norm would scale by zero */
    if (!(global > max_norm) || isinf(global))
        return DC_OK;
    const double scale = max_norm / global;
    for (int i = 0; i < n; ++i) {
        dc_tensor *g = dc_tensor_grad(params[i]);
        if (!g)
            continue;
        if (g->dtype == DC_F32) {
            scale_float(g->data, g->numel, scale, ctx->cpu.num_threads);
        } else {
            scale_double(g->data, g->numel, scale, ctx->cpu.num_threads);
        }
    }
    return DC_OK;
}
