/* Matrix product over the last two axes with broadcast batch axes, through
 * BLAS on the CPU. Transposed views reach BLAS as a transposed operand, so
 * dc_op_transpose costs no copy; other layouts are made contiguous first. */
#include <string.h>

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#include <pthread.h>
#endif

#include "../cuda/cuda_backend.h"
#include "backward.h"
#include "ops_internal.h"

/* A matrix inside a tensor: rows x cols, strides in elements. */
typedef struct mat {
    void *ptr;
    int64_t rows, cols, rs, cs;
} mat;

static mat transposed(mat m)
{
    mat t = {m.ptr, m.cols, m.rows, m.cs, m.rs};
    return t;
}

/* BLAS can read m when one of its strides is 1 (after ignoring the strides
 * of size-1 axes) and the other, its leading dimension, fits BLAS's int
 * (a view into rows longer than that is copied first). */
static bool blas_layout(const mat *m, bool *trans, int64_t *ld)
{
    *trans = false;
    *ld = 1;
    int64_t rs = m->rows == 1 ? (m->cols > 1 ? m->cols : 1) : m->rs;
    int64_t cs = m->cols == 1 ? 1 : m->cs;
    if (cs == 1 && rs >= (m->cols > 1 ? m->cols : 1) && rs <= INT32_MAX) {
        *trans = false;
        *ld = rs;
        return true;
    }
    rs = m->rows == 1 ? 1 : m->rs;
    cs = m->cols == 1 ? (m->rows > 1 ? m->rows : 1) : m->cs;
    if (rs == 1 && cs >= (m->rows > 1 ? m->rows : 1) && cs <= INT32_MAX) {
        *trans = true;
        *ld = cs;
        return true;
    }
    return false;
}

#ifdef _OPENMP
/* Held around every CPU product (gemm). */
static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;
#endif

/* c = a @ b + beta * c, with c row-major (cs == 1); BLAS on the CPU,
 * cuBLAS on a GPU. */
static dc_status gemm(dc_ctx *ctx, dc_dtype dtype, mat c, mat a, mat b, double beta)
{
    bool ta, tb;
    int64_t lda, ldb;
    blas_layout(&a, &ta, &lda);
    blas_layout(&b, &tb, &ldb);
    const int64_t ldc = c.rows == 1 ? (c.cols > 1 ? c.cols : 1) : c.rs;
    const int M = (int)a.rows, N = (int)b.cols, K = (int)a.cols;
    if (M == 0 || N == 0)
        return DC_OK;
    if (ctx->cuda)
        return dc_cuda_gemm(ctx, dtype, ta, tb, M, N, K, a.ptr, lda, 0, b.ptr, ldb, 0, beta, c.ptr, ldc, 0, 1);
#ifdef _OPENMP
    /* OpenBLAS's OpenMP build takes the calling thread's OpenMP count: the
     * context's, so that its regions and the context's own have one size
     * (see dc_pool_team); the caller's settings are given back after. It
     * keeps that count in process-wide state: two contexts of different
     * counts multiplying at once on two threads got wrong products, so one
     * product at a time runs, whatever the context. And it waits for every
     * thread it asked for: no more than OpenMP's thread limit, and no
     * dynamic adjustment (OMP_THREAD_LIMIT=1 or OMP_DYNAMIC=true hung it). */
    pthread_mutex_lock(&blas_lock);
    const int outer = omp_get_max_threads(), dynamic = omp_get_dynamic(), limit = omp_get_thread_limit();
    const int team = ctx->cpu.num_threads < limit ? ctx->cpu.num_threads : limit;
    if (outer != team)
        omp_set_num_threads(team);
    if (dynamic)
        omp_set_dynamic(0);
#endif
    if (dtype == DC_F32)
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f,
                    a.ptr, (int)lda, b.ptr, (int)ldb, (float)beta, c.ptr, (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0,
                    a.ptr, (int)lda, b.ptr, (int)ldb, beta, c.ptr, (int)ldc);
#ifdef _OPENMP
    if (outer != team)
        omp_set_num_threads(outer);
    if (dynamic)
        omp_set_dynamic(dynamic);
    pthread_mutex_unlock(&blas_lock);
#endif
    return DC_OK;
}

static mat matrix_at(const dc_tensor *t, int64_t offset)
{
    const int n = t->ndim;
    mat m = {(unsigned char *)t->data + (size_t)offset * dc_dtype_size(t->dtype), t->shape[n - 2], t->shape[n - 1],
             t->strides[n - 2], t->strides[n - 1]};
    return m;
}

/* The batch axes of the product, and where each operand's batch starts. */
typedef struct batching {
    int ndim;
    int64_t shape[DC_MAX_DIMS];
    int64_t a_strides[DC_MAX_DIMS], b_strides[DC_MAX_DIMS];
    int64_t count;
} batching;

static void batch_offsets(const batching *bt, int64_t i, int64_t *oa, int64_t *ob)
{
    *oa = *ob = 0;
    for (int d = bt->ndim - 1; d >= 0; --d) {
        int64_t c = i % bt->shape[d];
        i /= bt->shape[d];
        *oa += c * bt->a_strides[d];
        *ob += c * bt->b_strides[d];
    }
}

static void make_batching(const dc_tensor *a, const dc_tensor *b, int ndim, const int64_t *shape, batching *bt)
{
    bt->ndim = ndim;
    bt->count = 1;
    memcpy(bt->shape, shape, (size_t)ndim * sizeof *shape);
    for (int d = 0; d < ndim; ++d)
        bt->count *= shape[d];
    dc_broadcast_strides(a->ndim - 2, a->shape, a->strides, ndim, shape, bt->a_strides);
    dc_broadcast_strides(b->ndim - 2, b->shape, b->strides, ndim, shape, bt->b_strides);
}

/* A copy of t that BLAS can read, or t itself when it already can. */
static dc_tensor *blas_ready(dc_tape *tape, dc_tensor *t)
{
    mat m = matrix_at(t, 0);
    bool tr;
    int64_t ld;
    if (blas_layout(&m, &tr, &ld))
        return t;
    dc_tensor *c = dc_tape_alloc_tensor(tape, t->dtype, t->ndim, t->shape);
    if (!c || dc_tensor_copy(c, t) != DC_OK)
        return NULL;
    return c;
}

dc_tensor *dc_op_matmul(dc_tape *tape, dc_tensor *a, dc_tensor *b)
{
    const char *const labels[] = {"a", "b"};
    dc_tensor *in[2] = {a, b};
    if (dc_op_check_args(tape, "dc_op_matmul", 2, in, labels) != DC_OK)
        return NULL;
    dc_ctx *ctx = tape->ctx;
    char sa[128], sb[128];
    if (a->ndim < 2 || b->ndim < 2) {
        dc_error(ctx, DC_ERR_SHAPE, "dc_op_matmul: operands need at least 2 axes, got a %s and b %s",
                 dc_tensor_shape_str(a, sa, sizeof sa), dc_tensor_shape_str(b, sb, sizeof sb));
        return NULL;
    }
    if (a->dtype != b->dtype) {
        dc_error(ctx, DC_ERR_DTYPE, "dc_op_matmul: a is %s but b is %s", dc_dtype_name(a->dtype),
                 dc_dtype_name(b->dtype));
        return NULL;
    }
    const int64_t m = a->shape[a->ndim - 2], k = a->shape[a->ndim - 1];
    const int64_t k2 = b->shape[b->ndim - 2], n = b->shape[b->ndim - 1];
    if (k != k2) {
        dc_error(ctx, DC_ERR_SHAPE, "dc_op_matmul: a %s and b %s: inner sizes %lld and %lld differ",
                 dc_tensor_shape_str(a, sa, sizeof sa), dc_tensor_shape_str(b, sb, sizeof sb), (long long)k,
                 (long long)k2);
        return NULL;
    }
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX) {
        dc_error(ctx, DC_ERR_SHAPE, "dc_op_matmul: matrix sides above 2^31 are not supported");
        return NULL;
    }
    int ndims[2] = {a->ndim - 2, b->ndim - 2};
    const int64_t *shapes[2] = {a->shape, b->shape};
    int bnd, bi, bj, axis;
    int64_t bshape[DC_MAX_DIMS];
    if (!dc_broadcast_shape(2, ndims, shapes, &bnd, bshape, &bi, &bj, &axis)) {
        dc_error(ctx, DC_ERR_SHAPE, "dc_op_matmul: batch axes of a %s and b %s do not broadcast",
                 dc_tensor_shape_str(a, sa, sizeof sa), dc_tensor_shape_str(b, sb, sizeof sb));
        return NULL;
    }
    if (bnd + 2 > DC_MAX_DIMS) {
        dc_error(ctx, DC_ERR_SHAPE, "dc_op_matmul: result would have more than %d axes", DC_MAX_DIMS);
        return NULL;
    }
    int64_t yshape[DC_MAX_DIMS];
    memcpy(yshape, bshape, (size_t)bnd * sizeof *bshape);
    yshape[bnd] = m;
    yshape[bnd + 1] = n;
    dc_tensor *y = dc_tape_alloc_tensor(tape, a->dtype, bnd + 2, yshape);
    dc_tensor *ar = y ? blas_ready(tape, a) : NULL;
    dc_tensor *br = ar ? blas_ready(tape, b) : NULL;
    if (!br)
        return NULL;
    batching bt;
    make_batching(ar, br, bnd, bshape, &bt);
    /* no product when the result has no elements: an empty batch of 2^40
     * matrices is no loop of 2^40 empty calls */
    for (int64_t i = 0; y->numel > 0 && i < bt.count; ++i) {
        int64_t oa, ob;
        batch_offsets(&bt, i, &oa, &ob);
        if (gemm(ctx, y->dtype, matrix_at(y, i * m * n), matrix_at(ar, oa), matrix_at(br, ob), 0.0) != DC_OK)
            return NULL;
    }
    if (dc_tape_wants_node(tape, 2, in)) {
        dc_node *node = dc_tape_record(tape, DC_OP_MATMUL, 2, in, 1, &y);
        if (!node)
            return NULL;
        node->as.matmul.a = ar;
        node->as.matmul.b = br;
    }
    return y;
}

/* Adds g @ other^T (side 0: into a's gradient) or other^T @ g (side 1: into
 * b's) over the batch; a broadcast batch axis sums into one slice. */
static dc_status matmul_grad(dc_tape *tape, dc_node *node, int side)
{
    dc_tensor *x = node->in[side];
    const dc_tensor *ar = node->as.matmul.a, *br = node->as.matmul.b;
    const dc_tensor *y = node->out[0];
    const dc_tensor *g = dc_grad_contiguous(tape, y);
    if (!g)
        return DC_ERR_MEMORY;
    dc_write_mode mode;
    dc_status st = dc_grad_prepare(tape, x, &mode);
    if (st != DC_OK)
        return st;
    const dc_tensor *gx = x->grad;
    const size_t es = dc_dtype_size(gx->dtype);
    /* BLAS writes gx's matrices with an int leading dimension: a gradient
     * that is a view into a base's rows longer than that (a slice's) is
     * refused rather than written through a truncated one */
    if (gx->ndim >= 2 && gx->shape[gx->ndim - 2] > 1 && gx->strides[gx->ndim - 2] > INT32_MAX) {
        char s[128];
        return dc_error(tape->ctx, DC_ERR_UNSUPPORTED,
                        "dc_op_matmul's adjoint: the gradient of operand %s %s lies in rows of %lld elements, beyond "
                        "BLAS's int; make the operand contiguous first",
                        side == 0 ? "a" : "b", dc_tensor_shape_str(x, s, sizeof s),
                        (long long)gx->strides[gx->ndim - 2]);
    }
    if (gx->numel == 0 || y->numel == 0) {
        /* no element to write, or no product term to add: a sum over
         * nothing is zero, written where the gradient gets its first value */
        if (gx->numel > 0 && mode == DC_WRITE_ASSIGN)
            st = dc_mem_zero(tape->ctx, gx->data, (size_t)gx->numel * es);
        if (st == DC_OK)
            dc_grad_done(x);
        return st;
    }
    const int bnd = y->ndim - 2;
    batching bt;
    make_batching(ar, br, bnd, y->shape, &bt);
    /* Strides of x's gradient in the batch axes, to find each matrix, and
     * the number of each matrix (the gradient may be a view into a wider
     * tensor's, whose strides say nothing about the numbering). */
    int64_t gstrides[DC_MAX_DIMS], numbering[DC_MAX_DIMS], nstrides[DC_MAX_DIMS];
    dc_broadcast_strides(gx->ndim - 2, gx->shape, gx->strides, bnd, y->shape, gstrides);
    dc_contiguous_strides(gx->ndim - 2, gx->shape, numbering);
    dc_broadcast_strides(gx->ndim - 2, gx->shape, numbering, bnd, y->shape, nstrides);
    /* gx has elements here, so every matrix of it has some */
    const int64_t slice = gx->shape[gx->ndim - 2] * gx->shape[gx->ndim - 1];
    const int64_t n_slices = gx->numel / slice;
    unsigned char *written = dc_tape_alloc_meta(tape, (size_t)n_slices);
    if (!written)
        return DC_ERR_MEMORY;
    memset(written, mode == DC_WRITE_ACCUMULATE, (size_t)n_slices);
    const int64_t m = y->shape[bnd], n = y->shape[bnd + 1];
    for (int64_t i = 0; i < bt.count; ++i) {
        int64_t oa, ob, og = 0, s = 0, rest = i;
        batch_offsets(&bt, i, &oa, &ob);
        for (int d = bnd - 1; d >= 0; --d) {
            og += (rest % y->shape[d]) * gstrides[d];
            s += (rest % y->shape[d]) * nstrides[d];
            rest /= y->shape[d];
        }
        const mat gm = matrix_at(g, i * m * n);
        st = side == 0 ? gemm(tape->ctx, x->dtype, matrix_at(gx, og), gm, transposed(matrix_at(br, ob)),
                              written[s] ? 1.0 : 0.0)
                       : gemm(tape->ctx, x->dtype, matrix_at(gx, og), transposed(matrix_at(ar, oa)), gm,
                              written[s] ? 1.0 : 0.0);
        if (st != DC_OK)
            return st;
        written[s] = 1;
    }
    /* Slices no batch reached (an empty batch) still need a value. */
    for (int64_t s = 0; s < n_slices && st == DC_OK; ++s)
        if (!written[s])
            st = dc_mem_zero(tape->ctx, (unsigned char *)gx->data + (size_t)(s * slice) * es, (size_t)slice * es);
    if (st != DC_OK)
        return st;
    dc_grad_done(x);
    return DC_OK;
}

dc_status dc_matmul_backward(dc_tape *tape, dc_node *node)
{
    for (int side = 0; side < 2; ++side) {
        if (!node->in[side]->requires_grad)
            continue;
        /* a @ a: the second side adds to the first. */
        dc_status st = matmul_grad(tape, node, side);
        if (st != DC_OK)
            return st;
    }
    return DC_OK;
}
