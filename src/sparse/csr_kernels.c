/* The sparse ops' kernels: on the CPU here, on CUDA in src/cuda/sparse.cu.
 * Each output element is one sum, in the pattern's order, computed by one
 * thread: CPU threads split the output's rows, so the bits do not depend
 * on their number. */
#include "../cuda/sparse_cuda.h"
#include "csr_internal.h"

#include <string.h>

#include "../engine/stream_store.h"

/* Worth a team of threads from about this many multiply-adds. */
#define PARALLEL_MIN 32768

/* Columns of a product's row summed together: each element still sums its
 * entries in the pattern's order, while a row of x is read contiguously. */
#define MM_CHUNK 64

/* Entries ahead of the one at hand whose rows of x a product fetches into
 * the cache before use (mm_rows_): the rows are read at random. */
#define MM_AHEAD 16

/* A product's output (A X, assigned) of DC_STREAM_MIN_BYTES or more is
 * written with non-temporal stores: past the caches, so that it neither
 * reads the lines it replaces nor pushes the rows of x, read at random,
 * out of the shared cache. */
#define STREAM_COPY_float dc_stream_copy_f32
#define STREAM_COPY_double dc_stream_copy_f64

/* Entries of a row whose sampled products run side by side. */
#define SDDMM_LANES 4

/* The fused backward of a product (mm_back_): entries of a pattern row
 * whose sampled products run side by side, and the widest product it takes
 * (its row of the dense adjoint sums in registers and on the stack). */
#define BACK_LANES 4
#define BACK_MAX_N 256

/* Entries ahead of the one at hand whose rows of the output's adjoint are
 * fetched into the cache before use: the rows are read at random. */
#define BACK_AHEAD 16

/* The fused backward of A X up to this many multiply-adds (entries times
 * columns), and of A x at any size, runs on one thread walking the CSR side
 * (mm_back_serial_): the walk of the CSC side reads the values and writes
 * their adjoint at scattered places (threads sharing cache lines), which
 * costs more than a team saves unless each entry carries many columns. */
#define BACK_SERIAL_MAX 262144

/* Asks for the cache lines of `bytes` bytes at p (a hint: no effect on
 * results; nothing where the compiler has no such builtin). */
static inline void prefetch_row(const void *p, int64_t bytes)
{
#if defined(__GNUC__) || defined(__clang__)
    for (int64_t b = 0; b < bytes; b += 64)
        __builtin_prefetch((const char *)p + b);
#else
    (void)p;
    (void)bytes;
#endif
}

static int team(dc_ctx *ctx, int64_t work) { return dc_pool_team(&ctx->cpu, work > PARALLEL_MIN); }

/* One row q of mv_back_serial_: entries p0..p1-1. The entries of a row
 * have distinct columns r, so lanes side by side neither collide in acc nor
 * change the order in which each acc[r] sums. */
#define MV_BACK_ROW(T, VADD)                                                                       \
    _Pragma("omp simd")                                                                            \
    for (int64_t p = p0; p < p1; ++p) {                                                            \
        const int64_t r = idx[p];                                                                  \
        T dot = 0;                                                                                 \
        dot += gq * x[r * xr];                                                                     \
        acc[r * ar] += vals[p * vs] * gq;                                                          \
        vg[p * vgs] = VADD ? vg[p * vgs] + dot : dot;                                              \
    }

/* mm_back_serial_ for n == 1 with the index type I: for each entry p of
 * row q (r = idx[p]), vg[p] (= or +=) g[q] * x[r] and acc[r] += vals[p] *
 * g[q]. */
#define DEFINE_MV_BACK_SERIAL(T, I)                                                                \
    static void mv_back_serial_##T##_##I(int64_t rows, const I *ptr, const I *idx, const T *vals, int64_t vs, \
                                         const T *g, int64_t gr, const T *x, int64_t xr, T *vg, int64_t vgs, \
                                         bool vadd, T *acc, int64_t ar)                            \
    {                                                                                              \
        for (int64_t q = 0; q < rows; ++q) {                                                       \
            const T gq = g[q * gr];                                                                \
            const int64_t p0 = ptr[q], p1 = ptr[q + 1];                                            \
            if (vadd) {                                                                            \
                MV_BACK_ROW(T, true)                                                               \
            } else {                                                                               \
                MV_BACK_ROW(T, false)                                                              \
            }                                                                                      \
        }                                                                                          \
    }
DEFINE_MV_BACK_SERIAL(float, int32_t)
DEFINE_MV_BACK_SERIAL(float, int64_t)
DEFINE_MV_BACK_SERIAL(double, int32_t)
DEFINE_MV_BACK_SERIAL(double, int64_t)

#define DEFINE_KERNELS(T)                                                                          \
    /* mm_ for n == 1 (A x): the sum in a register, x NULL read as ones. */  \
    static void mv_##T(dc_csr_side s, const T *vals, int64_t vs, const T *x, int64_t xr, T *out,      \
                       int64_t orow, bool add, int threads)                                        \
    {                                                                                              \
        static const T one = 1;                                                                    \
        if (!x) {                                                                                  \
            x = &one;                                                                              \
            xr = 0;                                                                                \
        }                                                                                          \
        _Pragma("omp parallel for num_threads(threads) schedule(static)")                          \
        for (int64_t i = 0; i < s.out_rows; ++i) {                                                 \
            const int64_t p1 = dc_csr_ix(s.ptr, s.wide, i + 1);                                    \
            T acc = 0;                                                                             \
            for (int64_t p = dc_csr_ix(s.ptr, s.wide, i); p < p1; ++p)                             \
                acc += vals[(s.perm ? dc_csr_ix(s.perm, s.wide, p) : p) * vs] *                    \
                       x[dc_csr_ix(s.idx, s.wide, p) * xr];                                        \
            out[i * orow] = add ? out[i * orow] + acc : acc;                                       \
        }                                                                                          \
    }                                                                                              \
    /* mm_ for rows of x and out contiguous: a whole chunk of MM_CHUNK     \
     * columns sums in registers (its loops of a constant count), and the \
     * rows of x that the entries MM_AHEAD further on read are fetched     \
     * into the cache meanwhile. The same sums, in the same order, as mm_. */ \
    static void mm_rows_##T(dc_csr_side s, const T *vals, int64_t vs, const T *x, int64_t xr, int64_t n, T *out, \
                            int64_t orow, bool add, int threads)                                   \
    {                                                                                              \
        const bool stream = !add && (size_t)s.out_rows * (size_t)n * sizeof(T) >= DC_STREAM_MIN_BYTES; \
        _Pragma("omp parallel num_threads(threads)")                                               \
        {                                                                                          \
        _Pragma("omp for schedule(static)")                                                        \
        for (int64_t i = 0; i < s.out_rows; ++i) {                                                 \
            const int64_t p0 = dc_csr_ix(s.ptr, s.wide, i), p1 = dc_csr_ix(s.ptr, s.wide, i + 1);  \
            T *o = out + i * orow;                                                                 \
            for (int64_t c0 = 0; c0 < n; c0 += MM_CHUNK) {                                         \
                const int64_t cn = n - c0 < MM_CHUNK ? n - c0 : MM_CHUNK;                          \
                T acc[MM_CHUNK] = {0};                                                             \
                for (int64_t p = p0; p < p1; ++p) {                                                \
                    if (p + MM_AHEAD < s.nnz)                                                      \
                        prefetch_row(x + dc_csr_ix(s.idx, s.wide, p + MM_AHEAD) * xr + c0,         \
                                     cn * (int64_t)sizeof(T));                                     \
                    const T v = vals[(s.perm ? dc_csr_ix(s.perm, s.wide, p) : p) * vs];            \
                    const T *xp = x + dc_csr_ix(s.idx, s.wide, p) * xr + c0;                       \
                    if (cn == MM_CHUNK) {                                                          \
                        for (int c = 0; c < MM_CHUNK; ++c)                                         \
                            acc[c] += v * xp[c];                                                   \
                    } else {                                                                       \
                        for (int64_t c = 0; c < cn; ++c)                                           \
                            acc[c] += v * xp[c];                                                   \
                    }                                                                              \
                }                                                                                  \
                if (add)                                                                           \
                    for (int64_t c = 0; c < cn; ++c)                                               \
                        o[c0 + c] += acc[c];                                                       \
                else if (!stream || !STREAM_COPY_##T(o + c0, acc, cn))                             \
                    for (int64_t c = 0; c < cn; ++c)                                               \
                        o[c0 + c] = acc[c];                                                        \
            }                                                                                      \
        }                                                                                          \
        if (stream)                                                                                \
            dc_stream_fence();                                                                     \
        }                                                                                          \
    }                                                                                              \
    static void mm_##T(dc_csr_side s, const T *vals, int64_t vs, const T *x, int64_t xr, int64_t xc,    \
                       int64_t n, T *out, int64_t orow, int64_t ocol, bool add, int threads)        \
    {                                                                                              \
        if (n == 1) {                                                                              \
            mv_##T(s, vals, vs, x, xr, out, orow, add, threads);                                   \
            return;                                                                                \
        }                                                                                          \
        if (x && xc == 1 && ocol == 1) {                                                           \
            mm_rows_##T(s, vals, vs, x, xr, n, out, orow, add, threads);                           \
            return;                                                                                \
        }                                                                                          \
        _Pragma("omp parallel for num_threads(threads) schedule(static)")                          \
        for (int64_t i = 0; i < s.out_rows; ++i) {                                                 \
            const int64_t p0 = dc_csr_ix(s.ptr, s.wide, i), p1 = dc_csr_ix(s.ptr, s.wide, i + 1);  \
            for (int64_t c0 = 0; c0 < n; c0 += MM_CHUNK) {                                         \
                const int64_t cn = n - c0 < MM_CHUNK ? n - c0 : MM_CHUNK;                          \
                T acc[MM_CHUNK] = {0};                                                             \
                for (int64_t p = p0; p < p1; ++p) {                                                \
                    const T v = vals[(s.perm ? dc_csr_ix(s.perm, s.wide, p) : p) * vs];            \
                    const T *xp = x ? x + dc_csr_ix(s.idx, s.wide, p) * xr + c0 * xc : NULL;       \
                    for (int64_t c = 0; c < cn; ++c)                                               \
                        acc[c] += v * (xp ? xp[c * xc] : (T)1);                                    \
                }                                                                                  \
                for (int64_t c = 0; c < cn; ++c) {                                                 \
                    T *o = out + i * orow + (c0 + c) * ocol;                                       \
                    *o = add ? *o + acc[c] : acc[c];                                               \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    /* SDDMM_LANES entries of a row at once, each its own sum over c in    \
     * order (the same bits as one at a time): independent chains of adds. \
     * A NULL operand reads a single 1 with strides 0. A row's last block  \
     * repeats its first entry in the lanes past the row, results unused. */ \
    static void sddmm_##T(const dc_csr *a, const T *u, int64_t ur, int64_t uc, const T *v, int64_t vr,   \
                          int64_t vc, int64_t n, T *out, int64_t os, bool add, int threads)        \
    {                                                                                              \
        static const T one = 1;                                                                    \
        if (!u) {                                                                                  \
            u = &one;                                                                              \
            ur = uc = 0;                                                                           \
        }                                                                                          \
        if (!v) {                                                                                  \
            v = &one;                                                                              \
            vr = vc = 0;                                                                           \
        }                                                                                          \
        _Pragma("omp parallel for num_threads(threads) schedule(static)")                          \
        for (int64_t i = 0; i < a->rows; ++i) {                                                    \
            const T *ui = u + i * ur;                                                              \
            const int64_t p1 = dc_csr_ix(a->row_ptr, a->wide, i + 1);                              \
            for (int64_t p = dc_csr_ix(a->row_ptr, a->wide, i); p < p1; p += SDDMM_LANES) {        \
                const T *vj[SDDMM_LANES];                                                          \
                T acc[SDDMM_LANES];                                                                \
                for (int e = 0; e < SDDMM_LANES; ++e) {                                            \
                    vj[e] = v + dc_csr_ix(a->col_idx, a->wide, p + e < p1 ? p + e : p) * vr;       \
                    acc[e] = 0;                                                                    \
                }                                                                                  \
                for (int64_t c = 0; c < n; ++c) {                                                  \
                    const T uc_ = ui[c * uc];                                                      \
                    for (int e = 0; e < SDDMM_LANES; ++e)                                          \
                        acc[e] += uc_ * vj[e][c * vc];                                             \
                }                                                                                  \
                for (int e = 0; e < SDDMM_LANES && p + e < p1; ++e) {                              \
                    T *o = out + (p + e) * os;                                                     \
                    *o = add ? *o + acc[e] : acc[e];                                               \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    /* mm_back_ for n == 1 (A x): the sums in registers. */                  \
    static void mv_back_##T(dc_csr_side s, const T *vals, int64_t vs, const T *g, int64_t gr, const T *x,  \
                            int64_t xr, T *vg, int64_t vgs, bool vadd, T *xg, int64_t xgr, bool xadd,    \
                            int threads)                                                           \
    {                                                                                              \
        _Pragma("omp parallel for num_threads(threads) schedule(static)")                          \
        for (int64_t r = 0; r < s.out_rows; ++r) {                                                 \
            const T xr_ = x[r * xr];                                                               \
            const int64_t p1 = dc_csr_ix(s.ptr, s.wide, r + 1);                                    \
            T acc = 0;                                                                             \
            for (int64_t p = dc_csr_ix(s.ptr, s.wide, r); p < p1; ++p) {                           \
                const int64_t k = s.perm ? dc_csr_ix(s.perm, s.wide, p) : p;                       \
                const T gq = g[dc_csr_ix(s.idx, s.wide, p) * gr];                                  \
                T dot = 0;                                                                         \
                dot += gq * xr_;                                                                   \
                acc += vals[k * vs] * gq;                                                          \
                T *o = vg + k * vgs;                                                               \
                *o = vadd ? *o + dot : dot;                                                        \
            }                                                                                      \
            T *o = xg + r * xgr;                                                                   \
            *o = xadd ? *o + acc : acc;                                                            \
        }                                                                                          \
    }                                                                                              \
    /* Both adjoints of out = side * x in one walk of the side: for each    \
     * entry p of row r (q = idx[p], k = perm[p] or p), vg[k] (= or +=)     \
     * sum over c of g[q, c] * x[r, c] in order of c, as sddmm_, and        \
     * xg[r, c] (= or +=) sum over the entries of vals[k] * g[q, c] in the  \
     * side's order, as mm_ on the same side: the same bits as the two      \
     * kernels, g[q] read once for both. Dense rows contiguous, n at most   \
     * BACK_MAX_N. BACK_LANES entries at a time, then the rest one by one.  */ \
    static void mm_back_##T(dc_csr_side s, const T *vals, int64_t vs, const T *g, int64_t gr, const T *x,  \
                            int64_t xr, int64_t n, T *vg, int64_t vgs, bool vadd, T *xg, int64_t xgr,    \
                            bool xadd, int threads)                                                \
    {                                                                                              \
        if (n == 1) {                                                                              \
            mv_back_##T(s, vals, vs, g, gr, x, xr, vg, vgs, vadd, xg, xgr, xadd, threads);        \
            return;                                                                                \
        }                                                                                          \
        _Pragma("omp parallel for num_threads(threads) schedule(static)")                          \
        for (int64_t r = 0; r < s.out_rows; ++r) {                                                 \
            const T *xrow = x + r * xr;                                                            \
            T acc[BACK_MAX_N];                                                                     \
            for (int64_t c = 0; c < n; ++c)                                                        \
                acc[c] = 0;                                                                        \
            const int64_t p1 = dc_csr_ix(s.ptr, s.wide, r + 1);                                    \
            int64_t p = dc_csr_ix(s.ptr, s.wide, r);                                               \
            for (; p + BACK_LANES <= p1; p += BACK_LANES) {                                        \
                const T *gq[BACK_LANES];                                                           \
                T v[BACK_LANES], dot[BACK_LANES];                                                  \
                int64_t k[BACK_LANES];                                                             \
                for (int e = 0; e < BACK_LANES; ++e) {                                             \
                    if (p + e + BACK_AHEAD < s.nnz)                                                \
                        prefetch_row(g + dc_csr_ix(s.idx, s.wide, p + e + BACK_AHEAD) * gr,        \
                                     n * (int64_t)sizeof(T));                                      \
                    k[e] = s.perm ? dc_csr_ix(s.perm, s.wide, p + e) : p + e;                      \
                    gq[e] = g + dc_csr_ix(s.idx, s.wide, p + e) * gr;                              \
                    v[e] = vals[k[e] * vs];                                                        \
                    dot[e] = 0;                                                                    \
                }                                                                                  \
                for (int64_t c = 0; c < n; ++c) {                                                  \
                    const T xc = xrow[c];                                                          \
                    for (int e = 0; e < BACK_LANES; ++e)                                           \
                        dot[e] += gq[e][c] * xc;                                                   \
                }                                                                                  \
                for (int64_t c = 0; c < n; ++c) {                                                  \
                    T a = acc[c];                                                                  \
                    for (int e = 0; e < BACK_LANES; ++e)                                           \
                        a += v[e] * gq[e][c];                                                      \
                    acc[c] = a;                                                                    \
                }                                                                                  \
                for (int e = 0; e < BACK_LANES; ++e) {                                             \
                    T *o = vg + k[e] * vgs;                                                        \
                    *o = vadd ? *o + dot[e] : dot[e];                                              \
                }                                                                                  \
            }                                                                                      \
            for (; p < p1; ++p) {                                                                  \
                const int64_t k = s.perm ? dc_csr_ix(s.perm, s.wide, p) : p;                       \
                const T *gq = g + dc_csr_ix(s.idx, s.wide, p) * gr;                                \
                const T v = vals[k * vs];                                                          \
                T dot = 0;                                                                         \
                for (int64_t c = 0; c < n; ++c) {                                                  \
                    dot += gq[c] * xrow[c];                                                        \
                    acc[c] += v * gq[c];                                                           \
                }                                                                                  \
                T *o = vg + k * vgs;                                                               \
                *o = vadd ? *o + dot : dot;                                                        \
            }                                                                                      \
            for (int64_t c = 0; c < n; ++c) {                                                      \
                T *o = xg + r * xgr + c;                                                           \
                *o = xadd ? *o + acc[c] : acc[c];                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    /* mm_back_ for A (the CSC side) on one thread, walking the CSR side f \
     * instead: for each entry p of row q (r = idx[p]), vg[p] (= or +=)     \
     * sum over c of g[q, c] * x[r, c] in order of c, and acc[r, c] +=      \
     * vals[p] * g[q, c]. The entries of one r come in increasing q, the   \
     * CSC side's order, so acc, zeroed beforehand, ends with the bits of  \
     * mm_back_'s sums. Rows of g, x and acc contiguous.                   */ \
    static void mm_back_serial_##T(dc_csr_side f, const T *vals, int64_t vs, const T *g, int64_t gr, const T *x, \
                                   int64_t xr, int64_t n, T *vg, int64_t vgs, bool vadd, T *acc, int64_t ar) \
    {                                                                                              \
        if (n == 1) {                                                                              \
            if (f.wide)                                                                            \
                mv_back_serial_##T##_int64_t(f.out_rows, f.ptr, f.idx, vals, vs, g, gr, x, xr, vg, vgs, vadd, acc, \
                                             ar);                                                  \
            else                                                                                   \
                mv_back_serial_##T##_int32_t(f.out_rows, f.ptr, f.idx, vals, vs, g, gr, x, xr, vg, vgs, vadd, acc, \
                                             ar);                                                  \
            return;                                                                                \
        }                                                                                          \
        for (int64_t q = 0; q < f.out_rows; ++q) {                                                 \
            const T *gq = g + q * gr;                                                              \
            const int64_t p1 = dc_csr_ix(f.ptr, f.wide, q + 1);                                    \
            for (int64_t p = dc_csr_ix(f.ptr, f.wide, q); p < p1; ++p) {                           \
                const T *xrow = x + dc_csr_ix(f.idx, f.wide, p) * xr;                              \
                T *arow = acc + dc_csr_ix(f.idx, f.wide, p) * ar;                                  \
                const T v = vals[p * vs];                                                          \
                T dot = 0;                                                                         \
                for (int64_t c = 0; c < n; ++c) {                                                  \
                    dot += gq[c] * xrow[c];                                                        \
                    arow[c] += v * gq[c];                                                          \
                }                                                                                  \
                T *o = vg + p * vgs;                                                               \
                *o = vadd ? *o + dot : dot;                                                        \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    /* xg[r, c] += acc[r, c] for r < rows, c < n. */                        \
    static void add_rows_##T(const T *acc, int64_t ar, int64_t rows, int64_t n, T *xg, int64_t xgr)    \
    {                                                                                              \
        for (int64_t r = 0; r < rows; ++r)                                                         \
            for (int64_t c = 0; c < n; ++c)                                                        \
                xg[r * xgr + c] += acc[r * ar + c];                                                \
    }                                                                                              \
    static void permute_##T(const dc_csr *a, bool scatter, const T *in, int64_t is, T *out, int64_t os,  \
                            bool add, int threads)                                                 \
    {                                                                                              \
        _Pragma("omp parallel for num_threads(threads) schedule(static)")                          \
        for (int64_t p = 0; p < a->nnz; ++p) {                                                     \
            const int64_t e = dc_csr_ix(a->csc_perm, a->wide, p);                                  \
            const int64_t from = scatter ? p : e, to = scatter ? e : p;                            \
            T *o = out + to * os;                                                                  \
            *o = add ? *o + in[from * is] : in[from * is];                                         \
        }                                                                                          \
    }                                                                                              \
    static void dense_##T(const dc_csr *a, bool to_dense, T *vals, int64_t vs, T *d, int64_t dr,   \
                          int64_t dc, bool add, int threads)                                       \
    {                                                                                              \
        _Pragma("omp parallel for num_threads(threads) schedule(static)")                          \
        for (int64_t i = 0; i < a->rows; ++i) {                                                    \
            if (to_dense && !add)                                                                  \
                for (int64_t j = 0; j < a->cols; ++j)                                              \
                    d[i * dr + j * dc] = 0;                                                        \
            const int64_t p1 = dc_csr_ix(a->row_ptr, a->wide, i + 1);                              \
            for (int64_t p = dc_csr_ix(a->row_ptr, a->wide, i); p < p1; ++p) {                     \
                T *x = d + i * dr + dc_csr_ix(a->col_idx, a->wide, p) * dc;                        \
                T *y = vals + p * vs;                                                              \
                T *o = to_dense ? x : y;                                                           \
                const T in = to_dense ? *y : *x;                                                   \
                *o = add ? *o + in : in;                                                           \
            }                                                                                      \
        }                                                                                          \
    }
DEFINE_KERNELS(float)
DEFINE_KERNELS(double)

dc_csr_side dc_csr_rows_side(const dc_csr *a)
{
    dc_csr_side s = {a->rows, a->nnz, a->row_ptr, a->col_idx, NULL, a->wide, a->cols};
    return s;
}

dc_csr_side dc_csr_cols_side(const dc_csr *a)
{
    dc_csr_side s = {a->cols, a->nnz, a->col_ptr, a->csc_row, a->csc_perm, a->wide, a->rows};
    return s;
}

dc_status dc_csr_kernel_mm(dc_tape *tape, dc_dtype dtype, dc_csr_side side, dc_vec_view vals, dc_dense_view x,
                           int64_t n, dc_dense_view out, dc_write_mode mode)
{
    dc_ctx *ctx = tape->ctx;
    const bool add = mode == DC_WRITE_ACCUMULATE;
    if (ctx->cuda) {
        bool taken = false;
        const dc_status st =
            dc_cusparse_mm(ctx, tape, dtype, side.wide, side.out_rows, side.in_rows, side.nnz, side.ptr, side.idx,
                           side.perm, vals.ptr, vals.s, x.ptr, x.rs, x.cs, n, out.ptr, out.rs, out.cs, add, &taken);
        if (st != DC_OK || taken)
            return st;
        return dc_cuda_csr_mm(ctx, dtype, side.wide, side.out_rows, side.ptr, side.idx, side.perm, vals.ptr, vals.s,
                              x.ptr, x.rs, x.cs, n, out.ptr, out.rs, out.cs, add);
    }
    const int threads = team(ctx, side.nnz * n);
    if (dtype == DC_F32)
        mm_float(side, vals.ptr, vals.s, x.ptr, x.rs, x.cs, n, out.ptr, out.rs, out.cs, add, threads);
    else
        mm_double(side, vals.ptr, vals.s, x.ptr, x.rs, x.cs, n, out.ptr, out.rs, out.cs, add, threads);
    return DC_OK;
}

dc_status dc_csr_kernel_sddmm(dc_tape *tape, dc_dtype dtype, const dc_csr *a, dc_dense_view u, dc_dense_view v,
                              int64_t n, dc_vec_view out, dc_write_mode mode)
{
    dc_ctx *ctx = tape->ctx;
    const bool add = mode == DC_WRITE_ACCUMULATE;
    if (ctx->cuda) {
        bool taken = false;
        const dc_status st =
            dc_cusparse_sddmm(ctx, tape, dtype, a->wide, a->rows, a->cols, a->nnz, a->row_ptr, a->col_idx, u.ptr, u.rs,
                              u.cs, v.ptr, v.rs, v.cs, n, out.ptr, out.s, add, &taken);
        if (st != DC_OK || taken)
            return st;
        return dc_cuda_csr_sddmm(ctx, dtype, a->wide, a->rows, a->nnz, a->row_ptr, a->col_idx, u.ptr, u.rs, u.cs,
                                 v.ptr, v.rs, v.cs, n, out.ptr, out.s, add);
    }
    const int threads = team(ctx, a->nnz * n);
    if (dtype == DC_F32)
        sddmm_float(a, u.ptr, u.rs, u.cs, v.ptr, v.rs, v.cs, n, out.ptr, out.s, add, threads);
    else
        sddmm_double(a, u.ptr, u.rs, u.cs, v.ptr, v.rs, v.cs, n, out.ptr, out.s, add, threads);
    return DC_OK;
}

dc_status dc_csr_kernel_mm_backward(dc_tape *tape, dc_dtype dtype, dc_csr_side side, dc_csr_side fwd, dc_vec_view vals,
                                    dc_dense_view g, dc_dense_view x, int64_t n, dc_vec_view vals_grad,
                                    dc_write_mode vals_mode, dc_dense_view x_grad, dc_write_mode x_mode, bool *taken)
{
    dc_ctx *ctx = tape->ctx;
    /* a column stride matters only when there are several columns */
    const bool rows_contiguous = n == 1 || (g.cs == 1 && x.cs == 1 && x_grad.cs == 1);
    *taken = !ctx->cuda && n <= BACK_MAX_N && rows_contiguous && vals.ptr && g.ptr && x.ptr;
    if (!*taken)
        return DC_OK;
    const bool vadd = vals_mode == DC_WRITE_ACCUMULATE, xadd = x_mode == DC_WRITE_ACCUMULATE;
    if (side.perm && !fwd.perm && (n == 1 || side.nnz * n <= BACK_SERIAL_MAX)) {
        /* x's adjoint summed in place from zeros, or apart when it adds */
        const size_t es = dtype == DC_F32 ? sizeof(float) : sizeof(double);
        const int64_t rows = side.out_rows;
        char *acc = x_grad.ptr;
        int64_t ar = x_grad.rs;
        if (xadd) {
            acc = dc_tape_alloc_data(tape, (size_t)(rows * n) * es);
            if (!acc)
                return DC_ERR_MEMORY;
            ar = n;
        }
        for (int64_t r = 0; r < rows; ++r)
            memset(acc + (size_t)(r * ar) * es, 0, (size_t)n * es);
        if (dtype == DC_F32) {
            mm_back_serial_float(fwd, vals.ptr, vals.s, g.ptr, g.rs, x.ptr, x.rs, n, vals_grad.ptr, vals_grad.s, vadd,
                                 (float *)acc, ar);
            if (xadd)
                add_rows_float((const float *)acc, ar, rows, n, x_grad.ptr, x_grad.rs);
        } else {
            mm_back_serial_double(fwd, vals.ptr, vals.s, g.ptr, g.rs, x.ptr, x.rs, n, vals_grad.ptr, vals_grad.s,
                                  vadd, (double *)acc, ar);
            if (xadd)
                add_rows_double((const double *)acc, ar, rows, n, x_grad.ptr, x_grad.rs);
        }
        return DC_OK;
    }
    const int threads = team(ctx, side.nnz * n);
    if (dtype == DC_F32)
        mm_back_float(side, vals.ptr, vals.s, g.ptr, g.rs, x.ptr, x.rs, n, vals_grad.ptr, vals_grad.s, vadd,
                      x_grad.ptr, x_grad.rs, xadd, threads);
    else
        mm_back_double(side, vals.ptr, vals.s, g.ptr, g.rs, x.ptr, x.rs, n, vals_grad.ptr, vals_grad.s, vadd,
                       x_grad.ptr, x_grad.rs, xadd, threads);
    return DC_OK;
}

dc_status dc_csr_kernel_permute(dc_ctx *ctx, dc_dtype dtype, const dc_csr *a, bool scatter, dc_vec_view in,
                                dc_vec_view out, dc_write_mode mode)
{
    const bool add = mode == DC_WRITE_ACCUMULATE;
    if (ctx->cuda)
        return dc_cuda_csr_permute(ctx, dtype, a->wide, a->nnz, a->csc_perm, scatter, in.ptr, in.s, out.ptr, out.s,
                                   add);
    const int threads = team(ctx, a->nnz);
    if (dtype == DC_F32)
        permute_float(a, scatter, in.ptr, in.s, out.ptr, out.s, add, threads);
    else
        permute_double(a, scatter, in.ptr, in.s, out.ptr, out.s, add, threads);
    return DC_OK;
}

dc_status dc_csr_kernel_to_dense(dc_ctx *ctx, dc_dtype dtype, const dc_csr *a, dc_vec_view vals, dc_dense_view d,
                                 dc_write_mode mode)
{
    const bool add = mode == DC_WRITE_ACCUMULATE;
    if (ctx->cuda)
        return dc_cuda_csr_dense(ctx, dtype, a->wide, true, a->rows, a->cols, a->nnz, a->row_ptr, a->col_idx, vals.ptr,
                                 vals.s, d.ptr, d.rs, d.cs, add);
    const int threads = team(ctx, a->rows * a->cols);
    if (dtype == DC_F32)
        dense_float(a, true, vals.ptr, vals.s, d.ptr, d.rs, d.cs, add, threads);
    else
        dense_double(a, true, vals.ptr, vals.s, d.ptr, d.rs, d.cs, add, threads);
    return DC_OK;
}

dc_status dc_csr_kernel_sample(dc_ctx *ctx, dc_dtype dtype, const dc_csr *a, dc_dense_view d, dc_vec_view vals,
                               dc_write_mode mode)
{
    const bool add = mode == DC_WRITE_ACCUMULATE;
    if (ctx->cuda)
        return dc_cuda_csr_dense(ctx, dtype, a->wide, false, a->rows, a->cols, a->nnz, a->row_ptr, a->col_idx,
                                 vals.ptr, vals.s, d.ptr, d.rs, d.cs, add);
    const int threads = team(ctx, a->nnz);
    if (dtype == DC_F32)
        dense_float(a, false, vals.ptr, vals.s, d.ptr, d.rs, d.cs, add, threads);
    else
        dense_double(a, false, vals.ptr, vals.s, d.ptr, d.rs, d.cs, add, threads);
    return DC_OK;
}
