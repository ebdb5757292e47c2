/* Loops on the GPU: the elementwise kernels of src/engine/kernels.h, the store
 * policy's backward of a broadcast node, and broadcast-function launches.
 *
 * Every loop first writes its results contiguously, one thread per element
 * of the iteration shape, or per 16 bytes of it where every operand allows
 * (inputs read in place through their strides, 0 along broadcast axes):
 * straight into an output that is dense in that shape, else (or when two
 * outputs share elements) into a temporary. A
 * temporary is then routed into its output: summed over the axes along
 * which the output is broadcast, in a fixed order (no atomics: the same
 * inputs give bit-identical results), written or added through the output's
 * strides. An output summed along the rows of a 2-D iteration (the gradient
 * of a per-row operand, rows of up to kMaxSummedRow) is summed in the same
 * launch instead, a block per row (ew_rows_kernel). */
#include <stdint.h>
#include <string.h>

#include "block_reduce.cuh"
#include "vec16.cuh"

extern "C" {
#include "../engine/coalesce.h"
#include "../engine/shape.h"
}
#include "../../broadcast/pp.h"
#include "../../dual/scalar_math.h"

#define DC_S float
#define DC_SFX f32
#include "../engine/kernel_formulas.h"
#undef DC_S
#undef DC_SFX
#define DC_S double
#define DC_SFX f64
#include "../engine/kernel_formulas.h"
#undef DC_S
#undef DC_SFX

using dc_cuda::block_reduce;
using dc_cuda::group_reduce;
using dc_cuda::vec16;
using dc_cuda::kBlock;

namespace {

/* kernel_formula<T, ID>: listed kernel ID's formula and its array counts,
 * chosen when compiled (one kernel per ID: no switch per element). */
template <typename T, int ID> struct kernel_formula;
#define DC_KERNEL_FORMULA(ID, name, NI, NO)                                                       \
    template <> struct kernel_formula<float, DC_K_##ID> {                                          \
        static constexpr int n_in = NI, n_out = NO;                                                \
        static __device__ __forceinline__ void apply(const float *x, float *y, float s, float t)  \
        {                                                                                          \
            dc_kf_##name##_f32(x, y, s, t);                                                        \
        }                                                                                          \
    };                                                                                             \
    template <> struct kernel_formula<double, DC_K_##ID> {                                         \
        static constexpr int n_in = NI, n_out = NO;                                                \
        static __device__ __forceinline__ void apply(const double *x, double *y, double s, double t) \
        {                                                                                          \
            dc_kf_##name##_f64(x, y, s, t);                                                        \
        }                                                                                          \
    };
DC_KERNEL_LIST(DC_KERNEL_FORMULA)
#undef DC_KERNEL_FORMULA

/* The adjoint products of the store policy's backward. */
template <typename T> struct formulas;
template <> struct formulas<float> {
    static __device__ __forceinline__ float adj_mul(float a, float b) { return dc_adj_mul_f32(a, b); }
};
template <> struct formulas<double> {
    static __device__ __forceinline__ double adj_mul(double a, double b) { return dc_adj_mul_f64(a, b); }
};

/* The iteration after coalescing, and where each input is read. With `vec`,
 * a thread takes vec16<T>::n elements of the last axis at once: shape's
 * last extent counts vectors, and an input's last stride is 0 (one element
 * for the whole vector) or the vector's width; `tail` elements of a 1-D
 * iteration past its vectors, from `tail_start`, are taken one by one. */
struct ew_params {
    int64_t numel; /* iterations: vectors with vec */
    int ndim, n_in, n_out, vec;
    int64_t shape[DC_MAX_DIMS];
    int64_t step[DC_MAX_DIMS]; /* the grid's stride as digits of shape (last axis fastest) */
    int64_t tail_start, tail;
    const void *in[DC_KERNEL_MAX_IN];
    int64_t in_st[DC_KERNEL_MAX_IN][DC_MAX_DIMS];
    void *out[DC_KERNEL_MAX_OUT]; /* contiguous in the iteration shape */
    int add[DC_KERNEL_MAX_OUT];   /* add to it instead of writing */
    double s, t;
};

/* One element e of a contiguous output: written or added. */
template <typename T> __device__ __forceinline__ void put(T *o, int64_t e, T v, int add)
{
    o[e] = add ? o[e] + v : v;
}

/* Kernel ID over the iteration: each thread finds its first position's
 * coordinates with one division per axis, then advances them by the grid's
 * stride digit by digit with carries, so that no element costs a division
 * (broadcast operands are read through strides, 0 along broadcast axes). */
template <typename T, int ID, typename Index> __global__ void ew_kernel(ew_params p)
{
    using F = kernel_formula<T, ID>;
    constexpr int NI = F::n_in, NO = F::n_out, V = vec16<T>::n;
    using VT = typename vec16<T>::type;
    const T s = (T)p.s, t = (T)p.t;
    const Index n = (Index)p.numel, stride = (Index)gridDim.x * blockDim.x;
    const Index first = (Index)blockIdx.x * blockDim.x + threadIdx.x;
    const T *in[NI];
    for (int j = 0; j < NI; ++j)
        in[j] = (const T *)p.in[j];
    if (first < (Index)p.tail) { /* 1-D elements past the last whole vector */
        const int64_t e = p.tail_start + (int64_t)first;
        T x[NI], y[NO];
        for (int j = 0; j < NI; ++j)
            x[j] = in[j][p.in_st[j][0] ? e : 0];
        F::apply(x, y, s, t);
        for (int k = 0; k < NO; ++k)
            put((T *)p.out[k], e, y[k], p.add[k]);
    }
    if (first >= n)
        return;
    const int last = p.ndim - 1;
    Index idx[DC_MAX_DIMS];
    Index rest = first;
    for (int d = last; d >= 0; --d) {
        idx[d] = rest % (Index)p.shape[d];
        rest /= (Index)p.shape[d];
    }
    for (Index e = first; e < n; e += stride) {
        int64_t off[NI];
        for (int j = 0; j < NI; ++j) {
            off[j] = 0;
            for (int d = 0; d <= last; ++d)
                off[j] += (int64_t)idx[d] * p.in_st[j][d];
        }
        if (p.vec) {
            T x[V][NI], y[V][NO];
            for (int j = 0; j < NI; ++j) {
                T lanes[V];
                if (p.in_st[j][last]) {
                    const VT v = *(const VT *)(in[j] + off[j]);
                    memcpy(lanes, &v, sizeof v);
                } else {
                    for (int i = 0; i < V; ++i)
                        lanes[i] = in[j][off[j]];
                }
                for (int i = 0; i < V; ++i)
                    x[i][j] = lanes[i];
            }
            for (int i = 0; i < V; ++i)
                F::apply(x[i], y[i], s, t);
            for (int k = 0; k < NO; ++k) {
                VT *o = (VT *)p.out[k] + (int64_t)e;
                T lanes[V];
                if (p.add[k]) {
                    const VT old = *o;
                    memcpy(lanes, &old, sizeof old);
                    for (int i = 0; i < V; ++i)
                        lanes[i] += y[i][k];
                } else {
                    for (int i = 0; i < V; ++i)
                        lanes[i] = y[i][k];
                }
                VT v;
                memcpy(&v, lanes, sizeof v);
                *o = v;
            }
        } else {
            T x[NI], y[NO];
            for (int j = 0; j < NI; ++j)
                x[j] = in[j][off[j]];
            F::apply(x, y, s, t);
            for (int k = 0; k < NO; ++k)
                put((T *)p.out[k], (int64_t)e, y[k], p.add[k]);
        }
        Index carry = 0;
        for (int d = last; d >= 0; --d) {
            const Index v = idx[d] + (Index)p.step[d] + carry, extent = (Index)p.shape[d];
            carry = v >= extent;
            idx[d] = carry ? v - extent : v;
        }
    }
}

/* A 2-D iteration [rows, cols] in which some outputs of a kernel are sums
 * along the row (one value per row: the gradient of an operand broadcast
 * along it) and the others are contiguous: which outputs are summed, and the
 * step of each from row to row. */
struct rows_params {
    int64_t rows, cols;
    int summed[DC_KERNEL_MAX_OUT];
    int64_t row_stride[DC_KERNEL_MAX_OUT];
};

/* Kernel ID over whole rows: a block takes a row at a time, its threads
 * along it; contiguous outputs are written (or added to) as they come, and
 * each summed output is added up in double over the row, in an order fixed
 * by the block size, then written (or added) once: the sum that a second
 * kernel would make from a temporary, in the same launch. Inputs are read
 * through p's 2-D strides. */
template <typename T, int ID> __global__ void ew_rows_kernel(ew_params p, rows_params q)
{
    using F = kernel_formula<T, ID>;
    constexpr int NI = F::n_in, NO = F::n_out;
    __shared__ double scratch[kBlock];
    const T s = (T)p.s, t = (T)p.t;
    for (int64_t r = blockIdx.x; r < q.rows; r += gridDim.x) {
        double sum[NO];
        for (int k = 0; k < NO; ++k)
            sum[k] = 0;
        for (int64_t c = threadIdx.x; c < q.cols; c += blockDim.x) {
            T x[NI], y[NO];
            for (int j = 0; j < NI; ++j)
                x[j] = ((const T *)p.in[j])[r * p.in_st[j][0] + c * p.in_st[j][1]];
            F::apply(x, y, s, t);
            for (int k = 0; k < NO; ++k) {
                if (q.summed[k])
                    sum[k] += (double)y[k];
                else
                    put((T *)p.out[k], r * q.cols + c, y[k], p.add[k]);
            }
        }
        for (int k = 0; k < NO; ++k) {
            if (!q.summed[k])
                continue;
            const double total = block_reduce(sum[k], scratch, false);
            if (threadIdx.x == 0) {
                T *o = (T *)p.out[k] + r * q.row_stride[k];
                *o = p.add[k] ? *o + (T)total : (T)total;
            }
        }
    }
}

/* Launches kernel<T, Index> with 32-bit indices whenever the count allows. */
#define DC_LAUNCH_BY_INDEX(kernel, T, n, grid, stream, args)                                       \
    do {                                                                                           \
        if ((n) <= (int64_t)INT32_MAX)                                                             \
            kernel<T, uint32_t><<<(grid), kBlock, 0, (stream)>>>(args);                            \
        else                                                                                       \
            kernel<T, int64_t><<<(grid), kBlock, 0, (stream)>>>(args);                             \
    } while (0)

/* The store policy's backward: gx_j = sum_k g_k * P_(k,j), all contiguous. */
struct partials_params {
    int64_t numel;
    int m, nw;
    const void *g[DC_BFN_MAX_OUTPUTS];
    const void *partial[DC_BFN_MAX_ARRAYS];
    void *out[DC_BFN_MAX_INPUTS];
    int add[DC_BFN_MAX_INPUTS];
};

template <typename T, typename Index> __global__ void partials_kernel(partials_params p)
{
    const Index n = (Index)p.numel, step = (Index)gridDim.x * blockDim.x;
    for (Index e = (Index)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += step) {
        for (int j = 0; j < p.nw; ++j) {
            T *o = (T *)p.out[j];
            if (!o)
                continue;
            T s = formulas<T>::adj_mul(((const T *)p.g[0])[e], ((const T *)p.partial[j])[e]);
            for (int k = 1; k < p.m; ++k)
                s += formulas<T>::adj_mul(((const T *)p.g[k])[e], ((const T *)p.partial[k * p.nw + j])[e]);
            o[e] = p.add[j] ? o[e] + s : s;
        }
    }
}

/* partials_kernel 16 bytes at a time, where every array is 16-byte aligned
 * and the count a whole number of vectors: each adjoint read once per
 * vector (not once per gradient), the same products added in the same
 * order as element by element. */
template <typename T, typename Index> __global__ void partials_vec_kernel(partials_params p)
{
    constexpr int V = vec16<T>::n;
    using VT = typename vec16<T>::type;
    const Index n = (Index)(p.numel / V), step = (Index)gridDim.x * blockDim.x;
    for (Index v = (Index)blockIdx.x * blockDim.x + threadIdx.x; v < n; v += step) {
        T adj[DC_BFN_MAX_OUTPUTS][V];
#pragma unroll
        for (int k = 0; k < DC_BFN_MAX_OUTPUTS; ++k)
            if (k < p.m) {
                const VT a = ((const VT *)p.g[k])[v];
                memcpy(adj[k], &a, sizeof a);
            }
        for (int j = 0; j < p.nw; ++j) {
            VT *o = (VT *)p.out[j];
            if (!o)
                continue;
            T sum[V], part[V];
            const VT first = ((const VT *)p.partial[j])[v];
            memcpy(part, &first, sizeof first);
#pragma unroll
            for (int i = 0; i < V; ++i)
                sum[i] = formulas<T>::adj_mul(adj[0][i], part[i]);
#pragma unroll
            for (int k = 1; k < DC_BFN_MAX_OUTPUTS; ++k)
                if (k < p.m) {
                    const VT next = ((const VT *)p.partial[k * p.nw + j])[v];
                    memcpy(part, &next, sizeof next);
#pragma unroll
                    for (int i = 0; i < V; ++i)
                        sum[i] += formulas<T>::adj_mul(adj[k][i], part[i]);
                }
            if (p.add[j]) {
                const VT old = o[v];
                T was[V];
                memcpy(was, &old, sizeof old);
#pragma unroll
                for (int i = 0; i < V; ++i)
                    sum[i] = was[i] + sum[i];
            }
            VT out;
            memcpy(&out, sum, sizeof out);
            o[v] = out;
        }
    }
}

/* Whether partials_vec_kernel can take p: every array 16-byte aligned, a
 * whole number of vectors. */
template <typename T> bool partials_vectorize(const partials_params &p)
{
    if (p.numel % vec16<T>::n != 0)
        return false;
    for (int k = 0; k < p.m; ++k)
        if ((uintptr_t)p.g[k] % 16)
            return false;
    for (int q = 0; q < p.m * p.nw; ++q)
        if ((uintptr_t)p.partial[q] % 16)
            return false;
    for (int j = 0; j < p.nw; ++j)
        if (p.out[j] && (uintptr_t)p.out[j] % 16)
            return false;
    return true;
}

/* Where a routed value comes from, at index i of the iteration shape
 * (row-major): a contiguous array, or (the store policy's backward) the sum
 * over outputs of adjoint times partial, formed as it is reduced. */
template <typename T> struct array_source {
    const T *a;
    __device__ __forceinline__ double at(int64_t i) const { return (double)a[i]; }
};

template <typename T> struct partials_source {
    int m;
    const T *g[DC_BFN_MAX_OUTPUTS];
    const T *partial[DC_BFN_MAX_OUTPUTS];
    __device__ __forceinline__ double at(int64_t i) const
    {
        T s = formulas<T>::adj_mul(g[0][i], partial[0][i]);
        for (int k = 1; k < m; ++k)
            s += formulas<T>::adj_mul(g[k][i], partial[k][i]);
        return (double)s;
    }
};

/* An affine map x * s + t of a contiguous array, formed as it is reduced
 * (a sum or a mean): the bits of the map written out and then routed. */
template <typename T> struct affine_source {
    const T *x;
    T s, t;
    __device__ __forceinline__ double at(int64_t i) const
    {
        const T in[1] = {x[i]};
        T y[1];
        kernel_formula<T, DC_K_AFFINE>::apply(in, y, s, t);
        return (double)y[0];
    }
};

/* Route: out[kept] (=|+=) sum over reduced of src[kept, reduced]. kept and
 * reduced index spaces are row-major over their axes. Sums run in double and
 * in an order fixed by the shapes and the grid (no atomics): the same inputs
 * give the same bits on every run. */
struct route_params {
    int n_kept_axes, n_red_axes;
    int64_t kept_shape[DC_MAX_DIMS], kept_src[DC_MAX_DIMS], kept_dst[DC_MAX_DIMS];
    int64_t red_shape[DC_MAX_DIMS], red_src[DC_MAX_DIMS];
    int64_t n_kept, n_red;
    int64_t chunk;   /* two-stage reduction: reduced elements per block or thread */
    int n_chunks;    /* blocks or threads per kept element (1: one stage) */
    double *partial; /* two-stage reduction: [n_kept][n_chunks] */
    void *dst;
    int add;
};

/* Offsets of index i (row-major over n axes of `shape`) along two stride
 * sets; one axis needs no division. */
__device__ __forceinline__ void split(int64_t i, int n, const int64_t *shape, const int64_t *st_a, const int64_t *st_b,
                                      int64_t *a, int64_t *b)
{
    if (n == 1) {
        *a = i * st_a[0];
        if (b)
            *b = i * st_b[0];
        return;
    }
    *a = 0;
    if (b)
        *b = 0;
    for (int d = n - 1; d >= 0; --d) {
        const int64_t c = i % shape[d];
        i /= shape[d];
        *a += c * st_a[d];
        if (b)
            *b += c * st_b[d];
    }
}

template <typename T> __device__ __forceinline__ void route_store(const route_params &p, int64_t dst, double s)
{
    T *o = (T *)p.dst + dst;
    *o = p.add ? (T)((double)*o + s) : (T)s;
}

/* Threads (chunk of the reduced elements, kept element), the kept element
 * fastest, so that neighbouring threads read neighbours when the innermost
 * axis is kept (a bias row summed over a batch), or neighbouring short
 * rows when it is reduced (rows of 16 elements or fewer, one chunk each).
 * Each thread sums its chunk in order. With one chunk per kept element it
 * writes the result; with more (few kept elements with long sums: a bias
 * row over a large batch), its partial sum, which route_chunks adds up in
 * chunk order. */
template <typename T, class Src> __global__ void route_by_thread(route_params p, Src src)
{
    const int64_t n_items = p.n_kept * p.n_chunks;
    for (int64_t item = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; item < n_items;
         item += (int64_t)gridDim.x * blockDim.x) {
        const int64_t chunk = item / p.n_kept, k = item - chunk * p.n_kept;
        int64_t src0, dst;
        split(k, p.n_kept_axes, p.kept_shape, p.kept_src, p.kept_dst, &src0, &dst);
        const int64_t r0 = chunk * p.chunk, r1 = r0 + p.chunk < p.n_red ? r0 + p.chunk : p.n_red;
        double s = 0;
        for (int64_t r = r0; r < r1; ++r) {
            int64_t ro;
            split(r, p.n_red_axes, p.red_shape, p.red_src, NULL, &ro, NULL);
            s += src.at(src0 + ro);
        }
        if (p.n_chunks == 1)
            route_store<T>(p, dst, s);
        else
            p.partial[k * p.n_chunks + chunk] = s;
    }
}

/* Blocks (kept element, chunk of its reduced elements): threads stride the
 * chunk, then a tree in shared memory whose order the block size fixes (a
 * per-row control column summed along its row). With one chunk per kept
 * element the block writes the result; with more, its partial sum, which
 * route_chunks_by_block adds up (a scalar summed over everything). */
template <typename T, class Src> __global__ void route_by_block(route_params p, Src src)
{
    __shared__ double part[kBlock];
    const int64_t n_items = p.n_kept * p.n_chunks;
    for (int64_t item = blockIdx.x; item < n_items; item += gridDim.x) {
        const int64_t k = item / p.n_chunks, chunk = item - k * p.n_chunks;
        int64_t src0, dst;
        split(k, p.n_kept_axes, p.kept_shape, p.kept_src, p.kept_dst, &src0, &dst);
        const int64_t r0 = chunk * p.chunk, r1 = r0 + p.chunk < p.n_red ? r0 + p.chunk : p.n_red;
        double s = 0;
        for (int64_t r = r0 + threadIdx.x; r < r1; r += blockDim.x) {
            int64_t ro;
            split(r, p.n_red_axes, p.red_shape, p.red_src, NULL, &ro, NULL);
            s += src.at(src0 + ro);
        }
        s = block_reduce(s, part, false);
        if (threadIdx.x == 0) {
            if (p.n_chunks == 1)
                route_store<T>(p, dst, s);
            else
                p.partial[item] = s;
        }
    }
}

/* Groups of kRouteGroup threads, a kept element each (kBlock / kRouteGroup
 * of them a block), for many kept elements with short sums over the inner
 * axes (rows of 17 to 1023 elements summed): the group's threads stride its
 * elements, then a tree in shared memory whose order the group's size
 * fixes (group_reduce). A block per kept element left most of its threads
 * idle there. */
constexpr int kRouteGroup = 32;
template <typename T, class Src> __global__ void route_by_group(route_params p, Src src)
{
    __shared__ double part[kBlock];
    constexpr int kGroups = kBlock / kRouteGroup;
    const int lane = (int)threadIdx.x % kRouteGroup;
    for (int64_t k0 = (int64_t)blockIdx.x * kGroups; k0 < p.n_kept; k0 += (int64_t)gridDim.x * kGroups) {
        /* k0 is uniform over the block: every thread meets every barrier */
        const int64_t k = k0 + (int64_t)threadIdx.x / kRouteGroup;
        int64_t src0 = 0, dst = 0;
        double s = 0;
        if (k < p.n_kept) {
            split(k, p.n_kept_axes, p.kept_shape, p.kept_src, p.kept_dst, &src0, &dst);
            for (int64_t r = lane; r < p.n_red; r += kRouteGroup) {
                int64_t ro;
                split(r, p.n_red_axes, p.red_shape, p.red_src, NULL, &ro, NULL);
                s += src.at(src0 + ro);
            }
        }
        s = group_reduce(s, part, kRouteGroup, false);
        if (lane == 0 && k < p.n_kept)
            route_store<T>(p, dst, s);
    }
}

/* route_chunks for the chunks of route_by_block, up to one per block of
 * the grid for each kept element: a block per kept element, each thread
 * adding its strided share of the partial sums in order, then the tree. */
template <typename T> __global__ void route_chunks_by_block(route_params p)
{
    __shared__ double part[kBlock];
    for (int64_t k = blockIdx.x; k < p.n_kept; k += gridDim.x) { /* uniform over the block */
        int64_t src0, dst;
        split(k, p.n_kept_axes, p.kept_shape, p.kept_src, p.kept_dst, &src0, &dst);
        double s = 0;
        for (int c = threadIdx.x; c < p.n_chunks; c += blockDim.x)
            s += p.partial[k * p.n_chunks + c];
        s = block_reduce(s, part, false);
        if (threadIdx.x == 0)
            route_store<T>(p, dst, s);
    }
}

template <typename T> __global__ void route_chunks(route_params p)
{
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < p.n_kept;
         k += (int64_t)gridDim.x * blockDim.x) {
        int64_t src0, dst;
        split(k, p.n_kept_axes, p.kept_shape, p.kept_src, p.kept_dst, &src0, &dst);
        double s = 0;
        for (int c = 0; c < p.n_chunks; ++c)
            s += p.partial[k * p.n_chunks + c];
        route_store<T>(p, dst, s);
    }
}

unsigned blocks_for(const dc_ctx *ctx, int64_t n) { return dc_cuda::grid_for(ctx, n); }

/* Where a loop output goes: straight into it (dense in the iteration shape,
 * or placed by a launch that writes through its strides) or into a
 * temporary that is routed afterwards. */
struct output_plan {
    void *direct;
    bool add;
    void *temp;
};


dc_status plan_outputs(dc_ctx *ctx, dc_dtype dtype, int ndim, const int64_t *shape, int n_out, const dc_loop_out *out,
                       output_plan *plan, const bool *placed = NULL)
{
    const int64_t numel = dc_shape_numel(ndim, shape);
    /* outputs that share elements are written one after another, from temporaries */
    const bool overlap = dc_outputs_overlap(dtype, ndim, shape, n_out, out);
    /* every entry first: after a failed allocation, finish_outputs frees what the plan holds */
    for (int k = 0; k < n_out; ++k) {
        plan[k].direct = NULL;
        plan[k].temp = NULL;
        plan[k].add = false;
    }
    for (int k = 0; k < n_out; ++k) {
        if ((placed && placed[k]) ||
            (out[k].mode != DC_WRITE_DISCARD && !overlap && dc_strides_contiguous(ndim, shape, out[k].strides))) {
            plan[k].direct = out[k].data;
            plan[k].add = out[k].mode == DC_WRITE_ACCUMULATE;
            continue;
        }
        plan[k].temp = dc_cuda_alloc(ctx, (size_t)numel * dc_dtype_size(dtype));
        if (!plan[k].temp)
            return DC_ERR_MEMORY;
    }
    return DC_OK;
}

/* Sums src over the axes where out's stride is 0 into out (or adds to it). */
template <typename T, class Src>
dc_status route(dc_ctx *ctx, int ndim, const int64_t *shape, const Src &src, const dc_loop_out *out)
{
    int64_t contiguous[DC_MAX_DIMS];
    dc_contiguous_strides(ndim, shape, contiguous);
    const int64_t *arrays[2] = {contiguous, out->strides};
    int nd;
    int64_t cshape[DC_MAX_DIMS], cst[2][DC_MAX_DIMS];
    dc_coalesce(ndim, shape, 2, arrays, &nd, cshape, cst);
    route_params p;
    memset(&p, 0, sizeof p);
    p.n_kept = p.n_red = 1;
    for (int d = 0; d < nd; ++d) {
        if (cst[1][d] != 0 || cshape[d] == 1) {
            p.kept_shape[p.n_kept_axes] = cshape[d];
            p.kept_src[p.n_kept_axes] = cst[0][d];
            p.kept_dst[p.n_kept_axes++] = cst[1][d];
            p.n_kept *= cshape[d];
        } else {
            p.red_shape[p.n_red_axes] = cshape[d];
            p.red_src[p.n_red_axes++] = cst[0][d];
            p.n_red *= cshape[d];
        }
    }
    if (p.n_kept == 0)
        return DC_OK; /* out has no elements */
    p.dst = out->data;
    p.add = out->mode == DC_WRITE_ACCUMULATE;
    p.n_chunks = 1;
    p.chunk = p.n_red;
    const bool inner_reduced = p.n_red_axes > 0 && (p.n_kept_axes == 0 || cst[1][nd - 1] == 0);
    /* Few kept elements with long sums: each sum split into chunks so that
     * the whole device takes part, their partial sums added in order. */
    int64_t chunks = 1;
    if (inner_reduced) {
        /* a block per chunk, at least 8 elements per thread */
        const int64_t blocks = ctx->cuda->max_blocks;
        if (p.n_kept < blocks && p.n_red > 16 * (int64_t)kBlock) {
            const int64_t most = (p.n_red + 8 * kBlock - 1) / (8 * kBlock);
            chunks = blocks / p.n_kept < most ? blocks / p.n_kept : most;
        }
    } else {
        /* a thread per chunk, at least 32 elements each, up to 2048 threads
         * per SM and 256 chunks, which route_chunks adds one after another */
        const int64_t threads = (int64_t)ctx->cuda->sm_count * 2048;
        if (p.n_kept < threads && p.n_red >= 64) {
            chunks = threads / p.n_kept;
            if (chunks > p.n_red / 32)
                chunks = p.n_red / 32;
            if (chunks > 256)
                chunks = 256;
        }
    }
    if (chunks > 1) {
        p.chunk = (p.n_red + chunks - 1) / chunks;
        p.n_chunks = (int)((p.n_red + p.chunk - 1) / p.chunk);
    }
    if (p.n_chunks > 1) {
        p.partial = (double *)dc_cuda_alloc(ctx, (size_t)(p.n_kept * p.n_chunks) * sizeof(double));
        if (!p.partial)
            return DC_ERR_MEMORY;
    }
    cudaStream_t st = ctx->cuda->stream;
    const int64_t items = p.n_kept * p.n_chunks;
    /* sums over the inner axes: a block each when long; else a group of
     * threads each; a thread each when they are a few elements (a row of
     * four: neighbouring threads read neighbouring rows) */
    const int64_t kShortSum = 16, kGroupSum = 4 * kBlock; /* below 16 * kBlock: one chunk each (above) */
    if (inner_reduced && p.n_chunks == 1 && p.n_red <= kShortSum) {
        route_by_thread<T, Src><<<blocks_for(ctx, items), kBlock, 0, st>>>(p, src);
    } else if (inner_reduced && p.n_chunks == 1 && p.n_red < kGroupSum) {
        const int64_t groups = (p.n_kept + kBlock / kRouteGroup - 1) / (kBlock / kRouteGroup);
        route_by_group<T, Src><<<(unsigned)(groups < 65535 ? groups : 65535), kBlock, 0, st>>>(p, src);
    } else if (inner_reduced) {
        const unsigned grid = (unsigned)(items < 65535 ? items : 65535);
        route_by_block<T, Src><<<grid, kBlock, 0, st>>>(p, src);
    } else {
        route_by_thread<T, Src><<<blocks_for(ctx, items), kBlock, 0, st>>>(p, src);
    }
    dc_status status = dc_cuda_launched(ctx, 1, "route kernel");
    if (status == DC_OK && p.n_chunks > 1) {
        if (inner_reduced) /* thousands of chunks each: a block per kept element */
            route_chunks_by_block<T><<<(unsigned)p.n_kept, kBlock, 0, st>>>(p);
        else /* at most 256 each */
            route_chunks<T><<<blocks_for(ctx, p.n_kept), kBlock, 0, st>>>(p);
        status = dc_cuda_launched(ctx, 1, "route kernel");
    }
    if (p.partial)
        dc_cuda_free(ctx, p.partial);
    return status;
}

dc_status route_array(dc_ctx *ctx, dc_dtype dtype, int ndim, const int64_t *shape, const void *temp,
                      const dc_loop_out *out)
{
    if (dtype == DC_F32)
        return route<float>(ctx, ndim, shape, array_source<float>{(const float *)temp}, out);
    return route<double>(ctx, ndim, shape, array_source<double>{(const double *)temp}, out);
}

/* After the main kernel: route every temporary, then give it back. */
dc_status finish_outputs(dc_ctx *ctx, dc_dtype dtype, int ndim, const int64_t *shape, int n_out,
                         const dc_loop_out *out, output_plan *plan, dc_status st)
{
    for (int k = 0; k < n_out; ++k) {
        if (!plan[k].temp)
            continue;
        if (st == DC_OK && out[k].mode != DC_WRITE_DISCARD)
            st = route_array(ctx, dtype, ndim, shape, plan[k].temp, &out[k]);
        dc_cuda_free(ctx, plan[k].temp);
    }
    return st;
}

/* A contiguous copy of an input read with broadcast strides (or the input
 * itself when it is dense), for launches that take contiguous arrays. */
const void *contiguous_input(dc_ctx *ctx, dc_dtype dtype, int ndim, const int64_t *shape, const dc_loop_in *in,
                             void **temp)
{
    *temp = NULL;
    if (dc_strides_contiguous(ndim, shape, in->strides))
        return in->data;
    const int64_t numel = dc_shape_numel(ndim, shape);
    *temp = dc_cuda_alloc(ctx, (size_t)numel * dc_dtype_size(dtype));
    if (!*temp)
        return NULL;
    int64_t contiguous[DC_MAX_DIMS];
    dc_contiguous_strides(ndim, shape, contiguous);
    dc_loop_out o;
    o.data = *temp;
    o.mode = DC_WRITE_ASSIGN;
    memcpy(o.strides, contiguous, sizeof contiguous);
    if (dc_cuda_run_kernel(ctx, DC_K_COPY, NULL, dtype, ndim, shape, 1, in, 1, &o) != DC_OK)
        return NULL;
    return *temp;
}

/* Gradient j of the store policy's backward, summed into `out` over the
 * axes along which it is broadcast. */
template <typename T>
dc_status route_partials_typed(dc_ctx *ctx, const partials_params &p, int j, int ndim, const int64_t *shape,
                               const dc_loop_out *out)
{
    partials_source<T> src;
    src.m = p.m;
    for (int k = 0; k < p.m; ++k) {
        src.g[k] = (const T *)p.g[k];
        src.partial[k] = (const T *)p.partial[k * p.nw + j];
    }
    return route<T>(ctx, ndim, shape, src, out);
}

dc_status route_partials(dc_ctx *ctx, dc_dtype dtype, const partials_params &p, int j, int ndim,
                         const int64_t *shape, const dc_loop_out *out)
{
    return dtype == DC_F32 ? route_partials_typed<float>(ctx, p, j, ndim, shape, out)
                           : route_partials_typed<double>(ctx, p, j, ndim, shape, out);
}

/* The store policy's backward: gradient j = sum_k adjoint_k * partial (k, j).
 * A gradient dense in the iteration shape is written by one elementwise pass;
 * one broadcast along some axes is summed over them straight from the
 * partials and adjoints, in the same kernel (no temporary), and so is every
 * gradient when two of them share elements (one after another). */
dc_status partials_backward(dc_ctx *ctx, const dc_partials_arg *a, dc_dtype dtype, int ndim, const int64_t *shape,
                            int64_t numel, const dc_loop_in *in, int n_out, const dc_loop_out *out)
{
    partials_params p;
    memset(&p, 0, sizeof p);
    p.numel = numel;
    p.m = a->n_out;
    p.nw = a->n_wrt;
    if (p.nw != n_out || p.m > DC_BFN_MAX_OUTPUTS)
        return dc_error(ctx, DC_ERR_ARG, "partials backward: %d outputs for %d gradients", n_out, p.nw);
    if (numel == 0) {
        /* nothing to read; a gradient broadcast along an empty axis is a sum
         * over nothing, written as zeros */
        dc_status st = DC_OK;
        for (int j = 0; j < p.nw && st == DC_OK; ++j)
            if (out[j].mode != DC_WRITE_DISCARD)
                st = route_partials(ctx, dtype, p, j, ndim, shape, &out[j]);
        return st;
    }
    void *adj_temp[DC_BFN_MAX_OUTPUTS] = {NULL};
    dc_status st = DC_OK;
    for (int k = 0; k < p.m && st == DC_OK; ++k)
        if (!(p.g[k] = contiguous_input(ctx, dtype, ndim, shape, &in[k], &adj_temp[k])))
            st = DC_ERR_MEMORY;
    for (int q = 0; q < p.m * p.nw; ++q)
        p.partial[q] = in[p.m + q].data;
    bool any_dense = false;
    const bool overlap = dc_outputs_overlap(dtype, ndim, shape, n_out, out); /* then routed one by one */
    for (int j = 0; j < p.nw; ++j) {
        const bool dense = out[j].mode != DC_WRITE_DISCARD && !overlap && dc_strides_contiguous(ndim, shape, out[j].strides);
        p.out[j] = dense ? out[j].data : NULL; /* NULL: routed below, or discarded */
        p.add[j] = out[j].mode == DC_WRITE_ACCUMULATE;
        any_dense = any_dense || dense;
    }
    cudaStream_t stream = ctx->cuda->stream;
    if (st == DC_OK && any_dense) {
        if (dtype == DC_F32 && partials_vectorize<float>(p))
            DC_LAUNCH_BY_INDEX(partials_vec_kernel, float, numel / 4, blocks_for(ctx, numel / 4), stream, p);
        else if (dtype == DC_F32)
            DC_LAUNCH_BY_INDEX(partials_kernel, float, numel, blocks_for(ctx, numel), stream, p);
        else if (partials_vectorize<double>(p))
            DC_LAUNCH_BY_INDEX(partials_vec_kernel, double, numel / 2, blocks_for(ctx, numel / 2), stream, p);
        else
            DC_LAUNCH_BY_INDEX(partials_kernel, double, numel, blocks_for(ctx, numel), stream, p);
        st = dc_cuda_launched(ctx, 1, "partials kernel");
    }
    for (int j = 0; j < p.nw && st == DC_OK; ++j) {
        if (p.out[j] || out[j].mode == DC_WRITE_DISCARD)
            continue;
        st = route_partials(ctx, dtype, p, j, ndim, shape, &out[j]);
    }
    for (int k = 0; k < p.m; ++k)
        dc_cuda_free(ctx, adj_temp[k]);
    return st;
}

/* Makes p iterate in 16-byte vectors where every operand allows it: the last
 * axis a whole number of vectors (or, in 1-D, vectors and a tail), each
 * input read along it contiguously from 16-byte aligned rows or not at all
 * (broadcast), the outputs 16-byte aligned. */
void vectorize(ew_params &p, size_t elem_size)
{
    const int64_t width = (int64_t)(16 / elem_size);
    const int last = p.ndim - 1;
    const int64_t whole = p.shape[last] / width;
    if (whole == 0 || (p.ndim > 1 && p.shape[last] % width))
        return;
    for (int j = 0; j < p.n_in; ++j) {
        const int64_t st = p.in_st[j][last];
        if (st != 0 && st != 1)
            return;
        if (st == 1) {
            if ((uintptr_t)p.in[j] % 16)
                return;
            for (int d = 0; d < last; ++d)
                if (p.in_st[j][d] % width)
                    return;
        }
    }
    for (int k = 0; k < p.n_out; ++k)
        if ((uintptr_t)p.out[k] % 16)
            return;
    p.vec = 1;
    if (p.ndim == 1) {
        p.tail_start = whole * width;
        p.tail = p.shape[0] - p.tail_start;
    }
    p.numel = p.numel / p.shape[last] * whole;
    p.shape[last] = whole;
    for (int j = 0; j < p.n_in; ++j)
        p.in_st[j][last] *= width;
}

template <typename T, int ID> void launch_ew(const ew_params &p, unsigned grid, cudaStream_t stream)
{
    if (p.numel <= (int64_t)INT32_MAX)
        ew_kernel<T, ID, uint32_t><<<grid, kBlock, 0, stream>>>(p);
    else
        ew_kernel<T, ID, int64_t><<<grid, kBlock, 0, stream>>>(p);
}

/* Launches kernel `id` (a listed one) over p. */
template <typename T> void launch_ew_by_id(int id, const ew_params &p, unsigned grid, cudaStream_t stream)
{
    switch (id) {
#define DC_EW_LAUNCH_CASE(ID, name, NI, NO)                                                       \
    case DC_K_##ID:                                                                                \
        launch_ew<T, DC_K_##ID>(p, grid, stream);                                                  \
        break;
        DC_KERNEL_LIST(DC_EW_LAUNCH_CASE)
#undef DC_EW_LAUNCH_CASE
    default:
        break;
    }
}

/* Longest row the row loop takes: a block of kBlock threads walks a row in
 * at most 16 strides. Longer rows, and sums over other axes, go through a
 * temporary and the route kernels. */
constexpr int64_t kMaxSummedRow = 16 * kBlock;

/* Whether kernel `id` can run as ew_rows_kernel: an iteration that is 2-D
 * (or 1-D: one row) once coalesced with the contiguous layout, the inputs
 * and the outputs, every output dense except at least one summed along the
 * row (stride 0 along it, none of them sharing elements with another),
 * rows of at most kMaxSummedRow. Fills p's inputs, shape and outputs, and q. */
bool plan_summed_rows(dc_dtype dtype, int ndim, const int64_t *shape, int n_in, const dc_loop_in *in, int n_out,
                      const dc_loop_out *out, ew_params &p, rows_params &q)
{
    if (n_in > DC_KERNEL_MAX_IN || n_out > DC_KERNEL_MAX_OUT || n_out < 2)
        return false;
    int64_t contiguous[DC_MAX_DIMS];
    dc_contiguous_strides(ndim, shape, contiguous);
    const int64_t *arrays[1 + DC_KERNEL_MAX_IN + DC_KERNEL_MAX_OUT];
    arrays[0] = contiguous;
    for (int j = 0; j < n_in; ++j)
        arrays[1 + j] = in[j].strides;
    for (int k = 0; k < n_out; ++k)
        arrays[1 + n_in + k] = out[k].strides;
    int nd;
    int64_t cshape[DC_MAX_DIMS], cst[1 + DC_KERNEL_MAX_IN + DC_KERNEL_MAX_OUT][DC_MAX_DIMS];
    dc_coalesce(ndim, shape, 1 + n_in + n_out, arrays, &nd, cshape, cst);
    if (nd < 1 || nd > 2 || dc_outputs_overlap(dtype, ndim, shape, n_out, out))
        return false;
    /* as 2-D: [rows, cols], strides {row step, column step} */
    const int64_t rows = nd == 2 ? cshape[0] : 1, cols = cshape[nd - 1];
    if (cols > kMaxSummedRow || cols < 1)
        return false;
    int n_summed = 0;
    for (int k = 0; k < n_out; ++k) {
        const int64_t row_step = nd == 2 ? cst[1 + n_in + k][0] : 0, col_step = cst[1 + n_in + k][nd - 1];
        const bool dense = col_step == 1 && row_step == (nd == 2 ? cols : 0);
        /* one value per row, each row's its own (a sum over rows too is left
         * to the route kernels) */
        const bool summed = col_step == 0 && cols > 1 && (row_step != 0 || rows == 1);
        if (out[k].mode == DC_WRITE_DISCARD || (!dense && !summed))
            return false;
        q.summed[k] = summed;
        q.row_stride[k] = row_step;
        n_summed += summed;
    }
    if (n_summed == 0)
        return false;
    q.rows = rows;
    q.cols = cols;
    p.ndim = 2;
    p.shape[0] = rows;
    p.shape[1] = cols;
    p.numel = rows * cols;
    p.n_in = n_in;
    p.n_out = n_out;
    for (int j = 0; j < n_in; ++j) {
        p.in[j] = in[j].data;
        p.in_st[j][0] = nd == 2 ? cst[1 + j][0] : 0;
        p.in_st[j][1] = cst[1 + j][nd - 1];
    }
    for (int k = 0; k < n_out; ++k) {
        p.out[k] = out[k].data;
        p.add[k] = out[k].mode == DC_WRITE_ACCUMULATE;
    }
    return true;
}

/* Launches ew_rows_kernel for kernel `id` (a listed one). */
template <typename T>
void launch_rows_by_id(int id, const ew_params &p, const rows_params &q, unsigned grid, cudaStream_t stream)
{
    switch (id) {
#define DC_EW_ROWS_CASE(ID, name, NI, NO)                                                          \
    case DC_K_##ID:                                                                                \
        ew_rows_kernel<T, DC_K_##ID><<<grid, kBlock, 0, stream>>>(p, q);                           \
        break;
        DC_KERNEL_LIST(DC_EW_ROWS_CASE)
#undef DC_EW_ROWS_CASE
    default:
        break;
    }
}

} // namespace

extern "C" dc_status dc_cuda_run_kernel(dc_ctx *ctx, dc_kernel_id id, const void *arg, dc_dtype dtype, int ndim,
                                        const int64_t *shape, int n_in, const dc_loop_in *in, int n_out,
                                        const dc_loop_out *out)
{
    DC_CUDA_ENTER(ctx);
    const int64_t numel = dc_shape_numel(ndim, shape);
    if (n_out > DC_BFN_MAX_INPUTS)
        return dc_error(ctx, DC_ERR_ARG, "%s: %d outputs exceed the CUDA loop's %d", dc_kernel_name(id), n_out,
                        DC_BFN_MAX_INPUTS);
    if ((int)id < 0 || (int)id > (int)DC_K_PARTIALS_BWD)
        return dc_error(ctx, DC_ERR_ARG, "dc_cuda_run_kernel: unknown kernel %d", (int)id);
    if (id == DC_K_PARTIALS_BWD)
        return partials_backward(ctx, (const dc_partials_arg *)arg, dtype, ndim, shape, numel, in, n_out, out);
    /* outputs summed along rows (an operand's gradient broadcast along
     * them), with the others dense: in one launch */
    if (numel > 0) {
        ew_params rp;
        rows_params rq;
        memset(&rp, 0, sizeof rp);
        memset(&rq, 0, sizeof rq);
        if (plan_summed_rows(dtype, ndim, shape, n_in, in, n_out, out, rp, rq)) {
            if (arg) {
                rp.s = ((const dc_affine_arg *)arg)->s;
                rp.t = ((const dc_affine_arg *)arg)->t;
            }
            const unsigned grid = (unsigned)(rq.rows < ctx->cuda->max_blocks ? rq.rows : ctx->cuda->max_blocks);
            if (dtype == DC_F32)
                launch_rows_by_id<float>((int)id, rp, rq, grid, ctx->cuda->stream);
            else
                launch_rows_by_id<double>((int)id, rp, rq, grid, ctx->cuda->stream);
            return dc_cuda_launched(ctx, 1, dc_kernel_name(id));
        }
    }
    /* an affine map summed over axes of a contiguous input (a sum, a mean):
     * the map applied as the route reads the input, where it would
     * otherwise be written whole to a temporary and read back */
    if (id == DC_K_AFFINE && arg && numel > 0 && n_in == 1 && n_out == 1 && out[0].mode != DC_WRITE_DISCARD &&
        !dc_strides_contiguous(ndim, shape, out[0].strides) && dc_strides_contiguous(ndim, shape, in[0].strides)) {
        const dc_affine_arg *a = (const dc_affine_arg *)arg;
        if (dtype == DC_F32)
            return route<float>(ctx, ndim, shape,
                                affine_source<float>{(const float *)in[0].data, (float)a->s, (float)a->t}, &out[0]);
        return route<double>(ctx, ndim, shape, affine_source<double>{(const double *)in[0].data, a->s, a->t},
                             &out[0]);
    }
    output_plan plan[DC_BFN_MAX_INPUTS];
    dc_status st = plan_outputs(ctx, dtype, ndim, shape, n_out, out, plan);
    if (st != DC_OK || numel == 0)
        return finish_outputs(ctx, dtype, ndim, shape, n_out, out, plan, st);
    cudaStream_t stream = ctx->cuda->stream;

    if (n_in > DC_KERNEL_MAX_IN || n_out > DC_KERNEL_MAX_OUT)
        return finish_outputs(ctx, dtype, ndim, shape, n_out, out, plan,
                              dc_error(ctx, DC_ERR_ARG, "%s: too many arrays for the CUDA loop", dc_kernel_name(id)));
    ew_params p;
    memset(&p, 0, sizeof p);
    const int64_t *arrays[DC_KERNEL_MAX_IN];
    for (int j = 0; j < n_in; ++j)
        arrays[j] = in[j].strides;
    dc_coalesce(ndim, shape, n_in, arrays, &p.ndim, p.shape, p.in_st);
    if (n_in == 0) {
        p.ndim = 1;
        p.shape[0] = numel;
    }
    p.numel = numel;
    p.n_in = n_in;
    p.n_out = n_out;
    for (int j = 0; j < n_in; ++j)
        p.in[j] = in[j].data;
    for (int k = 0; k < n_out; ++k) {
        p.out[k] = plan[k].direct ? plan[k].direct : plan[k].temp;
        p.add[k] = plan[k].add;
    }
    if (arg) {
        p.s = ((const dc_affine_arg *)arg)->s;
        p.t = ((const dc_affine_arg *)arg)->t;
    }
    vectorize(p, dc_dtype_size(dtype));
    const unsigned grid = blocks_for(ctx, p.numel);
    /* the grid's stride, as digits of the iteration shape */
    int64_t stride = (int64_t)grid * kBlock;
    for (int d = p.ndim - 1; d >= 0; --d) {
        p.step[d] = stride % p.shape[d];
        stride /= p.shape[d];
    }
    if (dtype == DC_F32)
        launch_ew_by_id<float>((int)id, p, grid, stream);
    else
        launch_ew_by_id<double>((int)id, p, grid, stream);
    st = dc_cuda_launched(ctx, 1, dc_kernel_name(id));
    return finish_outputs(ctx, dtype, ndim, shape, n_out, out, plan, st);
}

extern "C" dc_status dc_cuda_run_bfn(dc_ctx *ctx, dc_bfn_cuda_launcher launcher, dc_dtype dtype, int ndim,
                                     const int64_t *shape, int n_in, const dc_loop_in *in, int n_adj,
                                     const dc_loop_in *adj, int n_out, const dc_loop_out *out)
{
    DC_CUDA_ENTER(ctx);
    if (n_in > DC_BFN_MAX_INPUTS || n_adj > DC_BFN_MAX_OUTPUTS || n_out > DC_BFN_MAX_ARRAYS || ndim > DC_BFN_MAX_DIMS)
        return dc_error(ctx, DC_ERR_ARG, "broadcast function launch: too many arrays");
    const int64_t numel = dc_shape_numel(ndim, shape);
    /* The adjoint launch (the one that reads adjoints) writes each gradient
     * in place, through its strides, adding where it accumulates; a gradient
     * broadcast along an axis (a sum) or sharing elements with another goes
     * through a temporary and is routed, as every array of the other
     * launches that is not contiguous. */
    const bool placing = n_adj > 0;
    output_plan plan[DC_BFN_MAX_ARRAYS];
    bool placed[DC_BFN_MAX_ARRAYS] = {false};
    int n_placed = 0;
    if (placing && n_out > DC_BFN_MAX_INPUTS)
        return dc_error(ctx, DC_ERR_ARG, "broadcast function launch: %d gradients", n_out);
    if (placing && !dc_outputs_overlap(dtype, ndim, shape, n_out, out))
        for (int k = 0; k < n_out; ++k) {
            bool summed = false;
            for (int d = 0; d < ndim; ++d)
                summed = summed || (out[k].strides[d] == 0 && shape[d] != 1);
            placed[k] = out[k].mode != DC_WRITE_DISCARD && !summed;
            n_placed += placed[k];
        }
    dc_status st = plan_outputs(ctx, dtype, ndim, shape, n_out, out, plan, placed);
    void *adj_temp[DC_BFN_MAX_OUTPUTS] = {NULL};
    dc_bfn_cuda_launch L;
    memset(&L, 0, sizeof L);
    L.numel = numel;
    /* Coalesced with the row-major layout of the arrays written contiguously
     * (outputs, partials, adjoints), so that element e stays element e, and
     * with the inputs' and placed gradients' strides. */
    int64_t contiguous[DC_MAX_DIMS];
    dc_contiguous_strides(ndim, shape, contiguous);
    const int64_t *arrays[1 + DC_BFN_MAX_INPUTS + DC_BFN_MAX_INPUTS];
    arrays[0] = contiguous;
    for (int j = 0; j < n_in; ++j)
        arrays[1 + j] = in[j].strides;
    for (int k = 0, q = 0; k < n_out; ++k)
        if (placed[k])
            arrays[1 + n_in + q++] = out[k].strides;
    int64_t cstrides[1 + DC_BFN_MAX_INPUTS + DC_BFN_MAX_INPUTS][DC_MAX_DIMS];
    int cndim;
    dc_coalesce(ndim, shape, 1 + n_in + n_placed, arrays, &cndim, L.shape, cstrides);
    L.ndim = cndim;
    /* a gradient written contiguously keeps the contiguous strides */
    for (int k = 0, q = 0; placing && k < n_out; ++k) {
        const int64_t *from = placed[k] ? cstrides[1 + n_in + q++] : cstrides[0];
        memcpy(L.out_strides[k], from, sizeof L.out_strides[k]);
        if (placed[k] && out[k].mode == DC_WRITE_ACCUMULATE)
            L.out_add |= 1u << k;
    }
    L.block = kBlock;
    L.max_blocks = ctx->cuda->max_blocks;
    L.stream = ctx->cuda->stream;
    for (int j = 0; j < n_in; ++j) {
        L.in[j] = in[j].data;
        memcpy(L.in_strides[j], cstrides[1 + j], sizeof L.in_strides[j]);
    }
    for (int k = 0; k < n_adj && st == DC_OK; ++k)
        if (!(L.adj[k] = contiguous_input(ctx, dtype, ndim, shape, &adj[k], &adj_temp[k])))
            st = DC_ERR_MEMORY;
    /* the primal and dual launches write: an output of theirs that
     * accumulates goes through a temporary */
    for (int k = 0; k < n_out && st == DC_OK; ++k) {
        if (!placed[k] && plan[k].direct && plan[k].add) {
            plan[k].direct = NULL;
            if (!(plan[k].temp = dc_cuda_alloc(ctx, (size_t)numel * dc_dtype_size(dtype))))
                st = DC_ERR_MEMORY;
        }
        L.out[k] = plan[k].direct ? plan[k].direct : plan[k].temp;
    }
    if (st == DC_OK && numel > 0) {
        const int err = launcher(&L);
        ctx->cuda->launches++;
        st = dc_cuda_check(ctx, (cudaError_t)err, "broadcast function kernel");
    }
    for (int k = 0; k < n_adj; ++k)
        dc_cuda_free(ctx, adj_temp[k]);
    return finish_outputs(ctx, dtype, ndim, shape, n_out, out, plan, st);
}
