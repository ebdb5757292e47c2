#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_backend.h"
#include "cuda/nn_cuda.h"
#include "engine/kernels.h"
#include "tape_internal.h"

const char *dc_dtype_name(dc_dtype dtype)
{
    switch (dtype) {
    case DC_F32: return "f32";
    case DC_F64: return "f64";
    }
    return "unknown";
}

size_t dc_dtype_size(dc_dtype dtype)
{
    switch (dtype) {
    case DC_F32: return 4;
    case DC_F64: return 8;
    }
    return 0;
}

void dc_loop_in_tensor(dc_loop_in *in, const dc_tensor *t, int ndim, const int64_t *shape)
{
    in->data = t->data;
    in->control = false;
    dc_broadcast_strides(t->ndim, t->shape, t->strides, ndim, shape, in->strides);
}

void dc_loop_out_tensor(dc_loop_out *out, dc_tensor *t, int ndim, const int64_t *shape, dc_write_mode mode)
{
    out->data = t->data;
    out->mode = mode;
    dc_broadcast_strides(t->ndim, t->shape, t->strides, ndim, shape, out->strides);
}

int dc_tensors_repeated(dc_ctx *ctx, int n, dc_tensor *const *tensors)
{
    const uint64_t stamp = ++ctx->visit_stamp;
    for (int i = 0; i < n; ++i) {
        if (tensors[i]->visit == stamp)
            return i;
        tensors[i]->visit = stamp;
    }
    return -1;
}

dc_status dc_tensor_check_live(const dc_tensor *t, const char *fn, const char *what)
{
    t->ctx->api = fn;
    if (!t->tape || t->generation == t->tape->generation)
        return DC_OK;
    return dc_error(t->ctx, DC_ERR_STATE,
                    "%s: %s was made on a tape that was reset since (dc_tape_reset); a tape tensor lives until the "
                    "next reset of its tape",
                    fn, what);
}

dc_status dc_check_shape(dc_ctx *ctx, const char *what, int ndim, const int64_t *shape)
{
    if (ndim < 0 || ndim > DC_MAX_DIMS)
        return dc_error(ctx, DC_ERR_SHAPE, "%s: rank %d is outside 0..%d", what, ndim, DC_MAX_DIMS);
    if (ndim > 0 && !shape)
        return dc_error(ctx, DC_ERR_ARG, "%s: shape is NULL for rank %d", what, ndim);
    /* the product of the sizes, zeros counted as ones: it bounds the
     * elements, their bytes and the strides (which skip the zeros) */
    int64_t span = 1;
    for (int d = 0; d < ndim; ++d) {
        if (shape[d] < 0)
            return dc_error(ctx, DC_ERR_SHAPE, "%s: dimension %d is %lld; sizes must be >= 0", what, d,
                            (long long)shape[d]);
        const int64_t at_least_one = shape[d] > 0 ? shape[d] : 1;
        if (span > INT64_MAX / 16 / at_least_one) {
            char buf[256];
            return dc_error(ctx, DC_ERR_SHAPE,
                            "%s: shape %s is too large: its sizes, zeros counted as ones, multiply past 2^59", what,
                            dc_shape_format(buf, sizeof buf, ndim, shape));
        }
        span *= at_least_one;
    }
    return DC_OK;
}

void dc_tensor_init_header(dc_tensor *t, dc_ctx *ctx, dc_dtype dtype, int ndim, const int64_t *shape)
{
    memset(t, 0, sizeof *t);
    t->ctx = ctx;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int d = 0; d < ndim; ++d)
        t->shape[d] = shape[d];
    dc_contiguous_strides(ndim, t->shape, t->strides);
    t->numel = dc_shape_numel(ndim, t->shape);
    t->is_leaf = true;
}

/* A persistent tensor of zeros, for `fn` (named in messages). */
static dc_tensor *new_persistent(dc_ctx *ctx, const char *fn, dc_dtype dtype, int ndim, const int64_t *shape)
{
    if (!ctx)
        return NULL;
    if (dtype != DC_F32 && dtype != DC_F64) {
        dc_error(ctx, DC_ERR_DTYPE, "%s: unknown dtype %d", fn, (int)dtype);
        return NULL;
    }
    if (dc_check_shape(ctx, fn, ndim, shape) != DC_OK)
        return NULL;
    dc_tensor *t = malloc(sizeof *t);
    if (!t) {
        dc_error(ctx, DC_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    dc_tensor_init_header(t, ctx, dtype, ndim, shape);
    size_t bytes = (size_t)t->numel * dc_dtype_size(dtype);
    t->alloc = dc_mem_alloc(ctx, bytes);
    if (!t->alloc || dc_mem_zero(ctx, t->alloc, bytes) != DC_OK) {
        dc_mem_free(ctx, t->alloc);
        free(t);
        dc_error(ctx, DC_ERR_MEMORY, "%s: out of memory for %zu bytes", fn, bytes);
        return NULL;
    }
    t->data = t->alloc;
    return t;
}

dc_tensor *dc_tensor_new(dc_ctx *ctx, dc_dtype dtype, int ndim, const int64_t *shape)
{
    return new_persistent(ctx, "dc_tensor_new", dtype, ndim, shape);
}

dc_tensor *dc_tensor_from_host(dc_ctx *ctx, dc_dtype dtype, int ndim, const int64_t *shape, const void *data)
{
    if (ctx && !data) {
        dc_error(ctx, DC_ERR_ARG, "dc_tensor_from_host: data is NULL");
        return NULL;
    }
    dc_tensor *t = new_persistent(ctx, "dc_tensor_from_host", dtype, ndim, shape);
    if (!t)
        return NULL;
    if (dc_mem_from_host(ctx, t->data, data, (size_t)t->numel * dc_dtype_size(dtype)) != DC_OK) {
        dc_tensor_free(t);
        return NULL;
    }
    return t;
}

/* Frees a persistent tensor and its gradient, whatever its kind. */
static void free_persistent(dc_tensor *t)
{
    if (t->grad && !t->grad->tape)
        free_persistent(t->grad);
    dc_mem_free(t->ctx, t->alloc);
    free(t);
}

void dc_tensor_free(dc_tensor *t)
{
    /* A gradient belongs to its tensor, a tape tensor to its tape. */
    if (!t || t->tape || t->is_grad)
        return;
    free_persistent(t);
}

void dc_tensor_set_name(dc_tensor *t, const char *name)
{
    if (!t)
        return;
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
}

const char *dc_tensor_name(const dc_tensor *t) { return t ? t->name : ""; }

const char *dc_tensor_label(const dc_tensor *t, char *buf, size_t size)
{
    if (t->name[0])
        return t->name;
    return dc_shape_format(buf, size, t->ndim, t->shape);
}

dc_dtype dc_tensor_dtype(const dc_tensor *t) { return t ? t->dtype : DC_F32; }
int dc_tensor_ndim(const dc_tensor *t) { return t ? t->ndim : 0; }
const int64_t *dc_tensor_shape(const dc_tensor *t) { return t ? t->shape : NULL; }
int64_t dc_tensor_numel(const dc_tensor *t) { return t ? t->numel : 0; }
dc_ctx *dc_tensor_ctx(const dc_tensor *t) { return t ? t->ctx : NULL; }
void *dc_tensor_data(dc_tensor *t) { return t ? t->data : NULL; }
const int64_t *dc_tensor_strides(const dc_tensor *t) { return t ? t->strides : NULL; }

int64_t dc_tensor_dim(const dc_tensor *t, int axis)
{
    if (!t)
        return 0;
    if (axis < 0)
        axis += t->ndim;
    return (axis >= 0 && axis < t->ndim) ? t->shape[axis] : 0;
}

bool dc_tensor_is_contiguous(const dc_tensor *t)
{
    if (!t)
        return false;
    if (t->numel == 0)
        return true; /* no element is out of place */
    return dc_strides_contiguous(t->ndim, t->shape, t->strides);
}

char *dc_tensor_shape_str(const dc_tensor *t, char *buf, size_t size)
{
    if (!buf || size == 0)
        return buf;
    if (!t) {
        snprintf(buf, size, "(null)");
        return buf;
    }
    return dc_shape_format(buf, size, t->ndim, t->shape);
}

dc_status dc_tensor_set_requires_grad(dc_tensor *t, bool requires_grad)
{
    if (!t)
        return DC_ERR_ARG;
    dc_status st = dc_tensor_check_live(t, "dc_tensor_set_requires_grad", "the tensor");
    if (st != DC_OK)
        return st;
    if (!t->is_leaf)
        return dc_error(t->ctx, DC_ERR_ARG,
                        "dc_tensor_set_requires_grad: %s is computed by an op; only leaf tensors can be marked",
                        t->name[0] ? t->name : "the tensor");
    t->requires_grad = requires_grad;
    return DC_OK;
}

bool dc_tensor_requires_grad(const dc_tensor *t) { return t && t->requires_grad; }

dc_tensor *dc_tensor_grad(const dc_tensor *t)
{
    if (!t || !t->grad || !t->grad_valid)
        return NULL;
    return t->grad;
}

void dc_tensor_zero_grad(dc_tensor *t)
{
    if (!t)
        return;
    t->grad_valid = false;
    /* a persistent tensor's gradient is its own (a tape tensor's may be a
     * view of another's, or of the caller's adjoint) */
    if (t->grad && !t->tape && !t->grad_in_base)
        dc_mem_poison(t->ctx, t->grad->data, (size_t)t->grad->numel * dc_dtype_size(t->dtype));
}

/* Copies between a possibly strided tensor and dense host memory. */
static dc_status copy_strided(dc_ctx *ctx, const char *fn, dc_tensor *t, void *host, bool to_host)
{
    const size_t es = dc_dtype_size(t->dtype);
    const size_t bytes = (size_t)t->numel * es;
    if (dc_tensor_is_contiguous(t))
        return to_host ? dc_mem_to_host(ctx, host, t->data, bytes) : dc_mem_from_host(ctx, t->data, host, bytes);
    if (ctx->cuda)
        return dc_error(ctx, DC_ERR_UNSUPPORTED,
                        "%s: the tensor is a strided view on the device; make it contiguous first", fn);
    int64_t idx[DC_MAX_DIMS] = {0};
    for (int64_t e = 0; e < t->numel; ++e) {
        int64_t off = 0;
        for (int d = 0; d < t->ndim; ++d)
            off += idx[d] * t->strides[d];
        unsigned char *elem = (unsigned char *)t->data + (size_t)off * es;
        if (to_host)
            memcpy((unsigned char *)host + (size_t)e * es, elem, es);
        else
            memcpy(elem, (unsigned char *)host + (size_t)e * es, es);
        for (int d = t->ndim - 1; d >= 0; --d) {
            if (++idx[d] < t->shape[d])
                break;
            idx[d] = 0;
        }
    }
    return DC_OK;
}

/* copy_strided for a caller's host buffer, which must hold exactly the
 * tensor's elements. */
static dc_status copy_host_buffer(const char *fn, dc_tensor *t, void *host, size_t bytes, bool to_host)
{
    dc_status st = dc_tensor_check_live(t, fn, "the tensor");
    if (st != DC_OK)
        return st;
    const size_t need = (size_t)t->numel * dc_dtype_size(t->dtype);
    if (!host)
        return dc_error(t->ctx, DC_ERR_ARG, "%s: the %s buffer is NULL", fn, to_host ? "destination" : "source");
    if (bytes != need)
        return dc_error(t->ctx, DC_ERR_ARG, "%s: buffer of %zu bytes for %lld %s elements (%zu bytes)", fn, bytes,
                        (long long)t->numel, dc_dtype_name(t->dtype), need);
    return copy_strided(t->ctx, fn, t, host, to_host);
}

dc_status dc_tensor_to_host(const dc_tensor *t, void *dst, size_t bytes)
{
    return t ? copy_host_buffer("dc_tensor_to_host", (dc_tensor *)t, dst, bytes, true) : DC_ERR_ARG;
}

dc_status dc_tensor_from_host_copy(dc_tensor *t, const void *src, size_t bytes)
{
    return t ? copy_host_buffer("dc_tensor_from_host_copy", t, (void *)src, bytes, false) : DC_ERR_ARG;
}

static int64_t element_offset(const dc_tensor *t, int64_t index)
{
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; --d) {
        off += (index % t->shape[d]) * t->strides[d];
        index /= t->shape[d];
    }
    return off;
}

static dc_status read_element(const dc_tensor *t, int64_t index, double *value);

dc_status dc_tensor_get(const dc_tensor *t, int64_t index, double *value)
{
    if (!t)
        return DC_ERR_ARG;
    if (!value)
        return dc_error(t->ctx, DC_ERR_ARG, "dc_tensor_get: value is NULL");
    dc_status live = dc_tensor_check_live(t, "dc_tensor_get", "the tensor");
    if (live != DC_OK)
        return live;
    if (index < 0 || index >= t->numel)
        return dc_error(t->ctx, DC_ERR_ARG, "dc_tensor_get: index %lld outside 0..%lld", (long long)index,
                        (long long)t->numel - 1);
    return read_element(t, index, value);
}

/* Element `index` of t (checked) as a double; waits for the device. */
static dc_status read_element(const dc_tensor *t, int64_t index, double *value)
{
    const size_t es = dc_dtype_size(t->dtype);
    unsigned char buf[8];
    dc_status st = dc_mem_to_host(t->ctx, buf, (const unsigned char *)t->data + (size_t)element_offset(t, index) * es, es);
    if (st != DC_OK)
        return st;
    if (t->dtype == DC_F32) {
        float f;
        memcpy(&f, buf, 4);
        *value = f;
    } else {
        memcpy(value, buf, 8);
    }
    return DC_OK;
}

dc_status dc_tensor_item(const dc_tensor *t, double *value)
{
    if (!t)
        return DC_ERR_ARG;
    if (!value)
        return dc_error(t->ctx, DC_ERR_ARG, "dc_tensor_item: value is NULL");
    dc_status live = dc_tensor_check_live(t, "dc_tensor_item", "the tensor");
    if (live != DC_OK)
        return live;
    if (t->numel != 1) {
        char s[128];
        return dc_error(t->ctx, DC_ERR_SHAPE, "dc_tensor_item: tensor of shape %s has %lld elements, not 1",
                        dc_tensor_shape_str(t, s, sizeof s), (long long)t->numel);
    }
    return read_element(t, 0, value);
}

dc_status dc_tensor_set(dc_tensor *t, int64_t index, double value)
{
    if (!t)
        return DC_ERR_ARG;
    dc_status live = dc_tensor_check_live(t, "dc_tensor_set", "the tensor");
    if (live != DC_OK)
        return live;
    if (index < 0 || index >= t->numel)
        return dc_error(t->ctx, DC_ERR_ARG, "dc_tensor_set: index %lld outside 0..%lld", (long long)index,
                        (long long)t->numel - 1);
    const size_t es = dc_dtype_size(t->dtype);
    float f = (float)value;
    return dc_mem_from_host(t->ctx, (unsigned char *)t->data + (size_t)element_offset(t, index) * es,
                            t->dtype == DC_F32 ? (const void *)&f : (const void *)&value, es);
}

/* Fills through a host staging buffer with gen(i) for each element. */
static dc_status fill_with(const char *fn, dc_tensor *t, double (*gen)(dc_ctx *, const double *), const double *params)
{
    dc_status live = dc_tensor_check_live(t, fn, "the tensor");
    if (live != DC_OK)
        return live;
    const size_t es = dc_dtype_size(t->dtype);
    void *host = malloc((size_t)(t->numel ? t->numel : 1) * es);
    if (!host)
        return dc_error(t->ctx, DC_ERR_MEMORY, "%s: out of memory", fn);
    for (int64_t e = 0; e < t->numel; ++e) {
        double v = gen(t->ctx, params);
        if (t->dtype == DC_F32)
            ((float *)host)[e] = (float)v;
        else
            ((double *)host)[e] = v;
    }
    dc_status st = copy_strided(t->ctx, fn, t, host, false);
    free(host);
    return st;
}

static double gen_const(dc_ctx *ctx, const double *p)
{
    (void)ctx;
    return p[0];
}

/* p: lo, hi, the smallest value of the dtype at or above lo and the largest
 * below hi. The draw is clamped between the two, so that rounding to the
 * dtype keeps it in [lo, hi); where the dtype has no value there, it is lo. */
static double gen_uniform(dc_ctx *ctx, const double *p)
{
    if (p[2] > p[3])
        return p[0];
    const double u = dc_rng_uniform(ctx);
    /* hi - lo overflows for bounds beyond half the double range: in halves */
    const double v = isfinite(p[1] - p[0]) ? p[0] + (p[1] - p[0]) * u : 2 * (p[0] / 2 + (p[1] / 2 - p[0] / 2) * u);
    return v < p[2] ? p[2] : v > p[3] ? p[3] : v;
}

/* The smallest value of dtype at or above finite x / the largest below it. */
static double at_or_above(dc_dtype dtype, double x)
{
    if (dtype == DC_F64)
        return x;
    float f = (float)x;
    while ((double)f < x)
        f = nextafterf(f, INFINITY);
    return f;
}

static double below(dc_dtype dtype, double x)
{
    if (dtype == DC_F64)
        return nextafter(x, -INFINITY);
    float f = (float)x;
    while ((double)f >= x)
        f = nextafterf(f, -INFINITY);
    return f;
}

static double gen_normal(dc_ctx *ctx, const double *p)
{
    /* Box-Muller; 1 - u keeps the logarithm finite. */
    double u = 1.0 - dc_rng_uniform(ctx), v = dc_rng_uniform(ctx);
    return p[0] + p[1] * sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

dc_status dc_tensor_fill(dc_tensor *t, double value)
{
    if (!t)
        return DC_ERR_ARG;
    if (t->ctx->cuda && dc_tensor_is_contiguous(t)) {
        /* a kernel, without the host waiting */
        dc_status live = dc_tensor_check_live(t, "dc_tensor_fill", "the tensor");
        dc_capture_note_op(t->ctx, "dc_tensor_fill", 1, &t);
        return live == DC_OK ? dc_cuda_fill(t->ctx, t->dtype, t->data, t->numel, value) : live;
    }
    double p[1] = {value};
    return fill_with("dc_tensor_fill", t, gen_const, p);
}

dc_status dc_tensor_fill_uniform(dc_tensor *t, double lo, double hi)
{
    if (!t)
        return DC_ERR_ARG;
    if (!isfinite(lo) || !isfinite(hi))
        return dc_error(t->ctx, DC_ERR_ARG, "dc_tensor_fill_uniform: lo %g and hi %g must be finite", lo, hi);
    if (!(lo <= hi))
        return dc_error(t->ctx, DC_ERR_ARG, "dc_tensor_fill_uniform: lo %g is above hi %g", lo, hi);
    double p[4] = {lo, hi, at_or_above(t->dtype, lo), below(t->dtype, hi)};
    return fill_with("dc_tensor_fill_uniform", t, gen_uniform, p);
}

dc_status dc_tensor_fill_normal(dc_tensor *t, double mean, double stddev)
{
    if (!t)
        return DC_ERR_ARG;
    if (!isfinite(mean) || !isfinite(stddev) || stddev < 0)
        return dc_error(t->ctx, DC_ERR_ARG,
                        "dc_tensor_fill_normal: mean %g and stddev %g must be finite, stddev not negative", mean,
                        stddev);
    double p[2] = {mean, stddev};
    return fill_with("dc_tensor_fill_normal", t, gen_normal, p);
}

/* The bytes [*lo, *hi) from a tensor's first to past its last element. */
static void byte_span(const dc_tensor *t, uintptr_t *lo, uintptr_t *hi)
{
    const intptr_t es = (intptr_t)dc_dtype_size(t->dtype);
    intptr_t first = 0, last = 0;
    for (int d = 0; d < t->ndim; ++d) {
        const intptr_t reach = (intptr_t)(t->shape[d] - 1) * (intptr_t)t->strides[d] * es;
        if (reach < 0)
            first += reach;
        else
            last += reach;
    }
    *lo = (uintptr_t)t->data + (uintptr_t)first;
    *hi = (uintptr_t)t->data + (uintptr_t)last + (uintptr_t)es;
}

/* Whether two tensors of one context, with elements, may share memory (a
 * copy between shifted views of one tensor would read what it already
 * wrote). */
static bool spans_meet(const dc_tensor *a, const dc_tensor *b)
{
    if (a->ctx != b->ctx || a->numel == 0 || b->numel == 0)
        return false;
    uintptr_t a0, a1, b0, b1;
    byte_span(a, &a0, &a1);
    byte_span(b, &b0, &b1);
    return a0 < b1 && b0 < a1;
}

static dc_status copy_elements(dc_tensor *dst, const dc_tensor *src)
{
    dc_loop_in li;
    dc_loop_in_tensor(&li, src, dst->ndim, dst->shape);
    dc_loop_out lo;
    dc_loop_out_tensor(&lo, dst, dst->ndim, dst->shape, DC_WRITE_ASSIGN);
    return dc_run_kernel(dst->ctx, DC_K_COPY, NULL, dst->dtype, dst->ndim, dst->shape, 1, &li, 1, &lo);
}

/* src into a dense temporary, then into dst: for views that share memory. */
static dc_status copy_through_temporary(dc_tensor *dst, const dc_tensor *src)
{
    dc_ctx *ctx = dst->ctx;
    const size_t bytes = (size_t)src->numel * dc_dtype_size(src->dtype);
    dc_tensor tmp;
    dc_tensor_init_header(&tmp, ctx, src->dtype, src->ndim, src->shape);
    tmp.data = dc_mem_alloc(ctx, bytes);
    if (!tmp.data)
        return dc_error(ctx, DC_ERR_MEMORY,
                        "dc_tensor_copy: out of memory for %zu bytes to copy between views that share memory", bytes);
    dc_status st = copy_elements(&tmp, src);
    if (st == DC_OK)
        st = copy_elements(dst, &tmp);
    dc_mem_free(ctx, tmp.data);
    return st;
}

/* A copy between contexts of which one runs on a GPU goes through host
 * memory (a CPU context's loops cannot read device memory, nor a kernel the
 * host's), except between two CUDA contexts (on one device or two), where
 * dense tensors are copied from device memory to device memory. */
static dc_status copy_between_contexts(dc_tensor *dst, const dc_tensor *src)
{
    const size_t bytes = (size_t)src->numel * dc_dtype_size(src->dtype);
    if (dst->ctx->cuda && src->ctx->cuda && dc_tensor_is_contiguous(dst) && dc_tensor_is_contiguous(src))
        return dc_cuda_copy_between(dst->ctx, dst->data, src->ctx, src->data, bytes);
    void *host = malloc(bytes ? bytes : 1);
    if (!host)
        return dc_error(dst->ctx, DC_ERR_MEMORY, "dc_tensor_copy: out of memory for %zu bytes", bytes);
    dc_status st = dc_tensor_to_host(src, host, bytes);
    if (st != DC_OK)
        dc_error(dst->ctx, st, "dc_tensor_copy: reading the source failed: %s", dc_last_error(src->ctx));
    else
        st = dc_tensor_from_host_copy(dst, host, bytes);
    free(host);
    return st;
}

dc_status dc_tensor_copy(dc_tensor *dst, const dc_tensor *src)
{
    if (!dst)
        return DC_ERR_ARG;
    dc_ctx *ctx = dst->ctx;
    if (!src)
        return dc_error(ctx, DC_ERR_ARG, "dc_tensor_copy: the source is NULL");
    if (dst->dtype != src->dtype)
        return dc_error(ctx, DC_ERR_DTYPE, "dc_tensor_copy: destination is %s, source is %s",
                        dc_dtype_name(dst->dtype), dc_dtype_name(src->dtype));
    bool same = dst->ndim == src->ndim;
    for (int d = 0; same && d < dst->ndim; ++d)
        same = dst->shape[d] == src->shape[d];
    if (!same) {
        char a[128], b[128];
        return dc_error(ctx, DC_ERR_SHAPE, "dc_tensor_copy: destination %s and source %s differ in shape",
                        dc_tensor_shape_str(dst, a, sizeof a), dc_tensor_shape_str(src, b, sizeof b));
    }
    dc_status st = dc_tensor_check_live(dst, "dc_tensor_copy", "the destination");
    if (st == DC_OK)
        st = dc_tensor_check_live(src, "dc_tensor_copy", "the source");
    if (st != DC_OK)
        return st;
    dc_tensor *const both[2] = {dst, (dc_tensor *)src};
    dc_capture_note_op(ctx, "dc_tensor_copy", 2, both);
    if (src->ctx != ctx && (src->ctx->cuda || ctx->cuda))
        return copy_between_contexts(dst, src);
    if (dst->numel == 0 || (dst->data == src->data && memcmp(dst->strides, src->strides, sizeof dst->strides) == 0))
        return DC_OK; /* nothing to copy, or a view onto itself */
    if (spans_meet(dst, src))
        return copy_through_temporary(dst, src);
    return copy_elements(dst, src);
}
