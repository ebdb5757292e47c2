#include "loop.h"

#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "coalesce.h"
#include "shape.h"

/* Elements per chunk: the tiles of a chunk stay in L1/L2 while the kernel
 * runs, and a chunk is long enough to amortize the per-chunk bookkeeping. */
#define CHUNK 2048
#define TILE (CHUNK + 64)
/* Shortest row that makes a chunk of its own rather than have an input
 * copied (see make_plan). */
#define ROW_CHUNK_MIN 512
/* A loop with two chunks or more is split over the threads when that pays
 * for starting them (microseconds): when its kernel is heavy, or when its
 * elements times its arrays times the element size (an upper bound on the
 * bytes it moves) reach PARALLEL_MIN_BYTES. */
#define PARALLEL_MIN_BYTES (256 * 1024)
/* The per-thread sums of a reduction are combined in parallel when the
 * entries read (buffer entries times threads) exceed this. */
#define COMBINE_PARALLEL_MIN 32768

/* The loop after dropping size-1 axes and merging axes along which every
 * array is contiguous. Arrays are numbered inputs first, then outputs. */
typedef struct plan {
    int ndim;
    int n_arrays;
    int64_t shape[DC_MAX_DIMS];
    int64_t strides[DC_LOOP_MAX_ARRAYS][DC_MAX_DIMS];
    bool contiguous[DC_LOOP_MAX_ARRAYS]; /* dense row-major over the whole shape */
    bool row_constant[DC_LOOP_MAX_ARRAYS]; /* stride 0 along every axis before the last: each row the same */
    /* an output summed along the last axis only, whose rows no chunk cuts:
     * each element is one row's sum, written by the thread whose chunk has
     * the row, with no per-thread sums */
    bool row_sums[DC_LOOP_MAX_ARRAYS];
    bool reduces[DC_LOOP_MAX_ARRAYS];    /* an output summed over some axis */
    int64_t buf_strides[DC_LOOP_MAX_ARRAYS][DC_MAX_DIMS];
    int64_t buf_size[DC_LOOP_MAX_ARRAYS]; /* elements of the per-thread sum buffer */
    size_t buf_offset[DC_LOOP_MAX_ARRAYS]; /* bytes into the thread's scratch */
    int64_t inner, outer;
    int64_t rows_per_chunk; /* > 1: a chunk is that many whole rows */
    int64_t piece;          /* else: rows are cut in pieces of this length */
    int64_t pieces_per_row;
    int64_t n_chunks;
    size_t esize;
    size_t scratch_bytes;
} plan;

static void make_plan(const dc_loop *L, plan *p)
{
    const int na = L->n_in + L->n_out;
    p->n_arrays = na;
    const int64_t *strides[DC_LOOP_MAX_ARRAYS] = {NULL};
    for (int a = 0; a < na; ++a)
        strides[a] = a < L->n_in ? L->in[a].strides : L->out[a - L->n_in].strides;
    int nd;
    dc_coalesce(L->ndim, L->shape, na, strides, &nd, p->shape, p->strides);
    p->ndim = nd;
    p->inner = p->shape[nd - 1];
    p->outer = 1;
    for (int d = 0; d < nd - 1; ++d)
        p->outer *= p->shape[d];
    p->esize = dc_dtype_size(L->dtype);

    for (int a = 0; a < na; ++a) {
        bool dense = p->strides[a][nd - 1] == 1;
        for (int d = nd - 2; d >= 0 && dense; --d)
            dense = p->strides[a][d] == p->strides[a][d + 1] * p->shape[d + 1];
        p->contiguous[a] = dense;
        bool same_rows = true;
        for (int d = 0; d < nd - 1; ++d)
            same_rows = same_rows && p->strides[a][d] == 0;
        p->row_constant[a] = same_rows;
        p->reduces[a] = false;
        p->row_sums[a] = false;
        if (a < L->n_in)
            continue;
        for (int d = 0; d < nd; ++d)
            if (p->strides[a][d] == 0 && p->shape[d] > 1)
                p->reduces[a] = true;
    }

    /* An input dense along the rows but not over the whole shape (a row
     * broadcast over the rows before it, like a control vector per column)
     * is read in place when a chunk is one row, and copied into a tile row
     * by row when a chunk spans several: rows long enough make a chunk each. */
    bool row_views = false;
    for (int a = 0; a < L->n_in; ++a)
        row_views = row_views || (p->strides[a][nd - 1] == 1 && !p->contiguous[a]);
    if (p->inner >= CHUNK || (row_views && p->inner >= ROW_CHUNK_MIN)) {
        p->rows_per_chunk = 1;
        p->pieces_per_row = (p->inner + CHUNK - 1) / CHUNK;
        int64_t piece = (p->inner + p->pieces_per_row - 1) / p->pieces_per_row;
        p->piece = (piece + 15) & ~(int64_t)15;
        p->pieces_per_row = (p->inner + p->piece - 1) / p->piece;
        p->n_chunks = p->outer * p->pieces_per_row;
    } else {
        p->rows_per_chunk = CHUNK / p->inner;
        p->piece = p->inner;
        p->pieces_per_row = 1;
        p->n_chunks = (p->outer + p->rows_per_chunk - 1) / p->rows_per_chunk;
    }

    /* Scratch of one thread: a tile per array, then the sum buffers. */
    size_t bytes = (size_t)na * TILE * p->esize;
    for (int a = L->n_in; a < na; ++a) {
        bool along_rows = p->reduces[a] && p->pieces_per_row == 1 && p->strides[a][nd - 1] == 0;
        for (int d = 0; d < nd - 1; ++d)
            along_rows = along_rows && p->strides[a][d] != 0;
        p->row_sums[a] = along_rows;
        if (!p->reduces[a] || p->row_sums[a])
            continue;
        int64_t size = 1;
        for (int d = nd - 1; d >= 0; --d) {
            if (p->strides[a][d] == 0) {
                p->buf_strides[a][d] = 0;
            } else {
                p->buf_strides[a][d] = size;
                size *= p->shape[d];
            }
        }
        p->buf_size[a] = size;
        p->buf_offset[a] = bytes;
        bytes += (size_t)size * sizeof(double);
    }
    p->scratch_bytes = bytes;
}

/* Coordinates of row r over the axes before the last. */
static void row_coords(const plan *p, int64_t r, int64_t *coords)
{
    for (int d = p->ndim - 2; d >= 0; --d) {
        coords[d] = r % p->shape[d];
        r /= p->shape[d];
    }
}

static void next_row(const plan *p, int64_t *coords)
{
    for (int d = p->ndim - 2; d >= 0; --d) {
        if (++coords[d] < p->shape[d])
            return;
        coords[d] = 0;
    }
}

static int64_t row_offset(const plan *p, const int64_t *strides, const int64_t *coords)
{
    int64_t off = 0;
    for (int d = 0; d < p->ndim - 1; ++d)
        off += coords[d] * strides[d];
    return off;
}

/* One chunk: `rows` rows starting at `r0`, each the segment [c0, c0 + len). */
typedef struct chunk {
    int64_t r0, rows, c0, len, n;
} chunk;

static chunk chunk_at(const plan *p, int64_t c)
{
    chunk k;
    if (p->rows_per_chunk == 1) {
        k.r0 = c / p->pieces_per_row;
        k.rows = 1;
        k.c0 = (c % p->pieces_per_row) * p->piece;
        k.len = p->inner - k.c0 < p->piece ? p->inner - k.c0 : p->piece;
    } else {
        k.r0 = c * p->rows_per_chunk;
        k.rows = p->outer - k.r0 < p->rows_per_chunk ? p->outer - k.r0 : p->rows_per_chunk;
        k.c0 = 0;
        k.len = p->inner;
    }
    k.n = k.rows * k.len;
    return k;
}

#define DEFINE_STAGING(T)                                                                          \
    static void stage_##T(T *tile, const T *base, int64_t off, int64_t stride, int64_t len)        \
    {                                                                                              \
        if (stride == 0) {                                                                         \
            const T v = base[off];                                                                 \
            for (int64_t i = 0; i < len; ++i)                                                      \
                tile[i] = v;                                                                       \
        } else if (stride == 1) {                                                                  \
            memcpy(tile, base + off, (size_t)len * sizeof(T));                                     \
        } else {                                                                                   \
            for (int64_t i = 0; i < len; ++i)                                                      \
                tile[i] = base[off + i * stride];                                                  \
        }                                                                                          \
    }                                                                                              \
    static void unstage_##T(T *base, const T *tile, int64_t off, int64_t stride, int64_t len, bool add) \
    {                                                                                              \
        if (add) {                                                                                 \
            for (int64_t i = 0; i < len; ++i)                                                      \
                base[off + i * stride] += tile[i];                                                 \
        } else if (stride == 1) {                                                                  \
            memcpy(base + off, tile, (size_t)len * sizeof(T));                                     \
        } else {                                                                                   \
            for (int64_t i = 0; i < len; ++i)                                                      \
                base[off + i * stride] = tile[i];                                                  \
        }                                                                                          \
    }                                                                                              \
    static void sum_into_##T(double *buf, const T *tile, int64_t off, int64_t stride, int64_t len) \
    {                                                                                              \
        if (stride == 0) {                                                                         \
            double s = 0.0;                                                                        \
            _Pragma("omp simd reduction(+ : s)") for (int64_t i = 0; i < len; ++i) s += (double)tile[i]; \
            buf[off] += s;                                                                         \
        } else {                                                                                   \
            for (int64_t i = 0; i < len; ++i)                                                      \
                buf[off + i] += (double)tile[i];                                                   \
        }                                                                                          \
    }                                                                                              \
    /* buf[c] += tile[r * len + c] for the rows r in order, the adds of                            \
     * sum_into row by row; rows of at most 16 in registers */                                     \
    static void sum_rows_into_##T(double *buf, const T *tile, int64_t rows, int64_t len)           \
    {                                                                                              \
        if (len > 16) {                                                                            \
            for (int64_t r = 0; r < rows; ++r)                                                     \
                sum_into_##T(buf, tile + r * len, 0, 1, len);                                      \
            return;                                                                                \
        }                                                                                          \
        double acc[16] = {0};                                                                      \
        for (int64_t c = 0; c < len; ++c)                                                          \
            acc[c] = buf[c];                                                                       \
        for (int64_t r = 0; r < rows; ++r) {                                                       \
            const T *row = tile + r * len;                                                         \
            for (int c = 0; c < 16; ++c) /* lanes from len on are never stored */                  \
                acc[c] += c < len ? (double)row[c] : 0.0;                                          \
        }                                                                                          \
        for (int64_t c = 0; c < len; ++c)                                                          \
            buf[c] = acc[c];                                                                       \
    }                                                                                              \
    static bool all_equal_##T(const T *v, int64_t n)                                               \
    {                                                                                              \
        for (int64_t i = 1; i < n; ++i)                                                            \
            if (!(v[i] == v[0]))                                                                   \
                return false;                                                                      \
        return true;                                                                               \
    }
DEFINE_STAGING(float)
DEFINE_STAGING(double)

static void stage(const plan *p, void *tile, const void *base, int64_t off, int64_t stride, int64_t len)
{
    if (p->esize == 4)
        stage_float(tile, base, off, stride, len);
    else
        stage_double(tile, base, off, stride, len);
}

static void unstage(const plan *p, void *base, const void *tile, int64_t off, int64_t stride, int64_t len,
                    bool add)
{
    if (p->esize == 4)
        unstage_float(base, tile, off, stride, len, add);
    else
        unstage_double(base, tile, off, stride, len, add);
}

static void sum_into(const plan *p, double *buf, const void *tile, int64_t off, int64_t stride, int64_t len)
{
    if (p->esize == 4)
        sum_into_float(buf, tile, off, stride, len);
    else
        sum_into_double(buf, tile, off, stride, len);
}

static void sum_rows_into(const plan *p, double *buf, const void *tile, int64_t rows, int64_t len)
{
    if (p->esize == 4)
        sum_rows_into_float(buf, tile, rows, len);
    else
        sum_rows_into_double(buf, tile, rows, len);
}

static bool all_equal(const plan *p, const void *v, int64_t n)
{
    return p->esize == 4 ? all_equal_float(v, n) : all_equal_double(v, n);
}

static void run_chunk(const dc_loop *L, const plan *p, chunk k, unsigned char *scratch)
{
    const int n_in = L->n_in, na = p->n_arrays;
    const void *in_ptr[DC_LOOP_MAX_ARRAYS];
    void *out_ptr[DC_LOOP_MAX_ARRAYS];
    bool out_tiled[DC_LOOP_MAX_ARRAYS];
    int64_t coords[DC_MAX_DIMS], c0[DC_MAX_DIMS];
    const int nd = p->ndim;
    row_coords(p, k.r0, c0);
    /* Control inputs broadcast along the row are constant over each row: the
     * uniform kernel takes one value per row of them, and runs the chunk row
     * by row. Other control inputs must be constant over the whole chunk. */
    bool uniform = L->kernel_uniform != NULL;
    bool per_row = uniform;
    for (int a = 0; a < n_in && per_row; ++a)
        per_row = !L->in[a].control || p->strides[a][nd - 1] == 0;
    int64_t row_len = per_row ? k.len : k.n;

    for (int a = 0; a < na; ++a) {
        const int64_t *st = p->strides[a];
        const int64_t sin = st[nd - 1];
        void *tile = scratch + (size_t)a * TILE * p->esize;
        const bool direct = sin == 1 && (k.rows == 1 || p->contiguous[a]);
        const int64_t off0 = row_offset(p, st, c0) + k.c0 * sin;
        if (a < n_in) {
            const unsigned char *base = L->in[a].data;
            if (per_row && L->in[a].control) {
                /* one value per row */
                if (k.rows == 1) {
                    in_ptr[a] = base + (size_t)off0 * p->esize;
                } else {
                    memcpy(coords, c0, sizeof coords);
                    for (int64_t r = 0; r < k.rows; ++r) {
                        stage(p, (unsigned char *)tile + (size_t)r * p->esize, base, row_offset(p, st, coords), 0, 1);
                        next_row(p, coords);
                    }
                    in_ptr[a] = tile;
                }
                continue;
            }
            if (direct) {
                in_ptr[a] = base + (size_t)off0 * p->esize;
            } else if (p->row_constant[a] && sin == 1) {
                /* the same row in every row of the chunk: staged once, then
                 * doubled in place */
                const size_t row = (size_t)k.len * p->esize, all = (size_t)k.n * p->esize;
                memcpy(tile, base + (size_t)off0 * p->esize, row);
                for (size_t have = row; have < all; have *= 2)
                    memcpy((unsigned char *)tile + have, tile, have < all - have ? have : all - have);
                in_ptr[a] = tile;
            } else if (sin == 0 && p->esize == 4) {
                /* one value a row (a column broadcast along the rows) */
                memcpy(coords, c0, sizeof coords);
                float *t = tile;
                for (int64_t r = 0; r < k.rows; ++r) {
                    const float v = ((const float *)base)[row_offset(p, st, coords)];
                    for (int64_t i = 0; i < k.len; ++i)
                        t[r * k.len + i] = v;
                    next_row(p, coords);
                }
                in_ptr[a] = tile;
            } else {
                memcpy(coords, c0, sizeof coords);
                for (int64_t r = 0; r < k.rows; ++r) {
                    int64_t off = row_offset(p, st, coords) + k.c0 * sin;
                    stage(p, (unsigned char *)tile + (size_t)(r * k.len) * p->esize, base, off, sin, k.len);
                    next_row(p, coords);
                }
                in_ptr[a] = tile;
            }
            if (uniform && !per_row && L->in[a].control)
                uniform = all_equal(p, in_ptr[a], k.n);
        } else {
            const dc_loop_out *o = &L->out[a - n_in];
            out_tiled[a] = !(direct && o->mode == DC_WRITE_ASSIGN && !p->reduces[a]);
            out_ptr[a - n_in] = out_tiled[a] ? tile : (unsigned char *)o->data + (size_t)off0 * p->esize;
        }
    }

    if (uniform)
        L->kernel_uniform(k.n, in_ptr, out_ptr, &row_len);
    else
        L->kernel(k.n, in_ptr, out_ptr, L->arg);

    for (int a = n_in; a < na; ++a) {
        const dc_loop_out *o = &L->out[a - n_in];
        if (!out_tiled[a] || o->mode == DC_WRITE_DISCARD)
            continue;
        const int64_t *st = p->strides[a];
        const unsigned char *tile = scratch + (size_t)a * TILE * p->esize;
        if (p->row_sums[a]) {
            /* each row's sum straight into its element: the value the
             * per-thread sums would combine to (0.0 plus the row's sum from
             * the one thread that has it, plus the others' 0.0) */
            const bool add = o->mode == DC_WRITE_ACCUMULATE;
            memcpy(coords, c0, sizeof coords);
            for (int64_t r = 0; r < k.rows; ++r) {
                double sum = 0.0;
                sum_into(p, &sum, tile + (size_t)(r * k.len) * p->esize, 0, 0, k.len);
                const int64_t off = row_offset(p, st, coords);
                if (p->esize == 4) {
                    float *dst = (float *)o->data + off;
                    *dst = add ? (float)((double)*dst + sum) : (float)sum;
                } else {
                    double *dst = (double *)o->data + off;
                    *dst = add ? *dst + sum : sum;
                }
                next_row(p, coords);
            }
            continue;
        }
        if (p->reduces[a] && p->row_constant[a] && p->buf_strides[a][nd - 1] == 1) {
            /* every row into the same sums (a row broadcast's gradient) */
            sum_rows_into(p, (double *)(scratch + p->buf_offset[a]) + k.c0, tile, k.rows, k.len);
            continue;
        }
        memcpy(coords, c0, sizeof coords);
        for (int64_t r = 0; r < k.rows; ++r) {
            const void *seg = tile + (size_t)(r * k.len) * p->esize;
            if (p->reduces[a]) {
                double *buf = (double *)(scratch + p->buf_offset[a]);
                const int64_t *bst = p->buf_strides[a];
                int64_t off = row_offset(p, bst, coords) + k.c0 * bst[nd - 1];
                sum_into(p, buf, seg, off, bst[nd - 1], k.len);
            } else {
                int64_t off = row_offset(p, st, coords) + k.c0 * st[nd - 1];
                unstage(p, o->data, seg, off, st[nd - 1], k.len, o->mode == DC_WRITE_ACCUMULATE);
            }
            next_row(p, coords);
        }
    }
}

/* Writes the per-thread sums of output a into it: element i of the buffer
 * is the sum, in thread order, of every thread's element i. */
static void combine_sums(dc_ctx *ctx, const dc_loop *L, const plan *p, int a, int n_threads)
{
    const dc_loop_out *o = &L->out[a - L->n_in];
    if (o->mode == DC_WRITE_DISCARD)
        return;
    const int nd = p->ndim;
    const bool add = o->mode == DC_WRITE_ACCUMULATE;
    int kept[DC_MAX_DIMS], nk = 0;
    for (int d = 0; d < nd; ++d)
        if (p->strides[a][d] != 0)
            kept[nk++] = d;
    const int64_t size = p->buf_size[a];
#pragma omp parallel for num_threads(n_threads) if (size * n_threads > COMBINE_PARALLEL_MIN) schedule(static)
    for (int64_t i = 0; i < size; ++i) {
        double total = 0.0;
        for (int t = 0; t < n_threads; ++t)
            total += ((const double *)((const unsigned char *)ctx->cpu.scratch[t].ptr + p->buf_offset[a]))[i];
        int64_t rest = i, off = 0;
        for (int j = nk - 1; j >= 0; --j) {
            const int d = kept[j];
            off += (rest % p->shape[d]) * p->strides[a][d];
            rest /= p->shape[d];
        }
        if (p->esize == 4) {
            float *dst = (float *)o->data + off;
            *dst = add ? (float)((double)*dst + total) : (float)total;
        } else {
            double *dst = (double *)o->data + off;
            *dst = add ? *dst + total : total;
        }
    }
}

/* An empty iteration: outputs that are assigned get zeros (a sum over
 * nothing), wherever they have elements. */
static void zero_assigned_outputs(const dc_loop *L)
{
    const size_t esize = dc_dtype_size(L->dtype);
    for (int i = 0; i < L->n_out; ++i) {
        const dc_loop_out *o = &L->out[i];
        if (o->mode != DC_WRITE_ASSIGN)
            continue;
        int64_t n = 1;
        for (int d = 0; d < L->ndim; ++d)
            if (o->strides[d] != 0)
                n *= L->shape[d];
        if (n == 0)
            continue;
        int64_t idx[DC_MAX_DIMS] = {0};
        for (int64_t e = 0; e < n; ++e) {
            int64_t off = 0;
            for (int d = 0; d < L->ndim; ++d)
                off += idx[d] * o->strides[d];
            memset((unsigned char *)o->data + (size_t)off * esize, 0, esize);
            for (int d = L->ndim - 1; d >= 0; --d) {
                if (o->strides[d] == 0)
                    continue;
                if (++idx[d] < L->shape[d])
                    break;
                idx[d] = 0;
            }
        }
    }
}

dc_status dc_loop_run_cpu(dc_ctx *ctx, const dc_loop *L)
{
    if (L->n_in + L->n_out > DC_LOOP_MAX_ARRAYS)
        return dc_error(ctx, DC_ERR_ARG, "a loop over %d arrays exceeds the engine's limit of %d",
                        L->n_in + L->n_out, DC_LOOP_MAX_ARRAYS);
    int64_t numel = 1;
    for (int d = 0; d < L->ndim; ++d)
        numel *= L->shape[d];
    if (numel == 0) {
        zero_assigned_outputs(L);
        return DC_OK;
    }
    plan p;
    make_plan(L, &p);

    /* All of the context's threads or one (see dc_pool_team): with fewer
     * chunks than threads, some threads have none. */
    const bool worth_splitting = (L->heavy || numel * p.n_arrays * (int64_t)p.esize >= PARALLEL_MIN_BYTES) &&
                                 p.n_chunks >= 2 &&
                                 !dc_outputs_overlap(L->dtype, L->ndim, L->shape, L->n_out, L->out);
    const int n_threads = dc_pool_team(&ctx->cpu, worth_splitting);
    bool has_sums = false;
    for (int a = L->n_in; a < p.n_arrays; ++a)
        has_sums = has_sums || (p.reduces[a] && !p.row_sums[a]);

    /* Scratch is grown here, outside the parallel region. */
    for (int t = 0; t < n_threads; ++t)
        if (!dc_pool_scratch(&ctx->cpu, t, p.scratch_bytes))
            return dc_error(ctx, DC_ERR_MEMORY, "out of memory for %zu bytes of loop scratch", p.scratch_bytes);

    /* OpenMP may grant fewer threads than asked; partition by what it gave. */
    int granted = 1;
#pragma omp parallel num_threads(n_threads) if (n_threads > 1)
    {
#ifdef _OPENMP
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
        const int t = 0, nt = 1;
#endif
        if (t == 0)
            granted = nt;
        unsigned char *scratch = ctx->cpu.scratch[t].ptr;
        for (int a = L->n_in; a < p.n_arrays; ++a)
            if (p.reduces[a] && !p.row_sums[a])
                memset(scratch + p.buf_offset[a], 0, (size_t)p.buf_size[a] * sizeof(double));
        const int64_t c_begin = p.n_chunks * t / nt;
        const int64_t c_end = p.n_chunks * (t + 1) / nt;
        for (int64_t c = c_begin; c < c_end; ++c)
            run_chunk(L, &p, chunk_at(&p, c), scratch);
    }

    if (has_sums)
        for (int a = L->n_in; a < p.n_arrays; ++a)
            if (p.reduces[a] && !p.row_sums[a])
                combine_sums(ctx, L, &p, a, granted);
    return DC_OK;
}
