/* The element loops of the CUDA broadcast-function kernels, generic over
 * what is computed per element. bfn_cuda_kernels.cuh defines one operation
 * per pass (primal, dual, adjoint) and launches it through dc_bfn_cuda::launch.
 *
 * An operation Op provides
 *   typedef ... real;                         float or double
 *   enum { n_in, n_adj, n_arr, n_placed };    inputs, adjoints read, arrays
 *                                             written, of which the first
 *                                             n_placed are placed (below)
 *   static __device__ void apply(const real *x, const real *adj, real *r);
 * where x holds one element of every input, adj one element of every adjoint
 * (contiguous in the iteration shape), and r receives one value per written
 * array. An array written is contiguous in the iteration shape, or, among
 * the first n_placed, placed: written through strides of its own (a slice of
 * a gradient) and, where the launch says so, added to rather than written
 * (a gradient that accumulates), so that no temporary and no second kernel
 * is needed to put a result where it belongs.
 *
 * Two loops run an operation:
 *  - the row loop, for an iteration of at most two axes (the caller
 *    coalesces it) whose inputs are each either contiguous along the inner
 *    axis or constant along it (a per-row control column, a scalar): each
 *    thread handles a 16-byte group of consecutive elements of one row, read
 *    and written with 16-byte loads and stores; an input constant along the
 *    row is read once per group. No division but one 32-bit one per group.
 *    Placed arrays must be contiguous along the row too, at any row stride
 *    of whole 16-byte groups.
 *  - the strided loop for every other layout: one element per thread, each
 *    input and placed array found through its strides, with 32-bit index
 *    arithmetic whenever the element count allows it.
 * Both are grid-stride loops over a grid capped by the device's size. */
#ifndef DC_BROADCAST_BFN_CUDA_LOOPS_CUH
#define DC_BROADCAST_BFN_CUDA_LOOPS_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include <dualcast/bfn_abi.h>

namespace dc_bfn_cuda
{

static_assert(DC_BFN_MAX_INPUTS <= 32, "out_add holds one bit per gradient");

/* 16 bytes of T as one vector type, for single-instruction loads and stores. */
template <typename T> struct vec16;
template <> struct vec16<float> {
    typedef float4 type;
    enum { lanes = 4 };
};
template <> struct vec16<double> {
    typedef double2 type;
    enum { lanes = 2 };
};

template <typename T> __device__ __forceinline__ void load_lanes(const T *p, T *lane)
{
    const typename vec16<T>::type v = *reinterpret_cast<const typename vec16<T>::type *>(p);
    memcpy(lane, &v, sizeof v);
}

template <typename T> __device__ __forceinline__ void store_lanes(T *p, const T *lane)
{
    typename vec16<T>::type v;
    memcpy(&v, lane, sizeof v);
    *reinterpret_cast<typename vec16<T>::type *>(p) = v;
}

/* Kernel arguments, sized for the operation (no array may have length 0). */
template <class Op> struct params {
    typedef typename Op::real real;
    enum {
        n_in = Op::n_in > 0 ? Op::n_in : 1,
        n_adj = Op::n_adj > 0 ? Op::n_adj : 1,
        n_arr = Op::n_arr > 0 ? Op::n_arr : 1,
        n_placed = Op::n_placed > 0 ? Op::n_placed : 1
    };
    int64_t numel;
    int ndim;
    int64_t shape[DC_BFN_MAX_DIMS];
    const real *in[n_in];
    int64_t in_strides[n_in][DC_BFN_MAX_DIMS];
    const real *adj[n_adj];
    real *out[n_arr];
    /* the placed arrays: strides, and bit a set where array a is added to */
    int64_t out_strides[n_placed][DC_BFN_MAX_DIMS];
    uint32_t out_add;
    /* the row loop: vectors of 16 bytes in all, per row; each input's step
     * from row to row and whether it is contiguous along the row, each placed
     * array's step from row to row */
    uint32_t n_vectors, vectors_per_row;
    int64_t row_stride[n_in];
    bool along_row[n_in];
    int64_t out_row_stride[n_placed];
};

/* Whether array a of Op is added to. */
template <class Op> __device__ __forceinline__ bool adds(const params<Op> &p, int a)
{
    return a < Op::n_placed && ((p.out_add >> a) & 1u);
}

/* One element: inputs and placed arrays through their offsets, adjoints and
 * the other arrays at e. */
template <class Op>
__device__ __forceinline__ void run_element(const params<Op> &p, const int64_t *off, const int64_t *placed, int64_t e)
{
    typedef typename Op::real real;
    real x[params<Op>::n_in], adj[params<Op>::n_adj], r[params<Op>::n_arr];
#pragma unroll
    for (int j = 0; j < Op::n_in; ++j)
        x[j] = p.in[j][off[j]];
#pragma unroll
    for (int k = 0; k < Op::n_adj; ++k)
        adj[k] = p.adj[k][e];
    Op::apply(x, adj, r);
#pragma unroll
    for (int a = 0; a < Op::n_arr; ++a) {
        real *to = p.out[a] + (a < Op::n_placed ? placed[a < Op::n_placed ? a : 0] : e);
        *to = adds(p, a) ? *to + r[a] : r[a];
    }
}

template <class Op, typename Index> __global__ void strided_kernel(const params<Op> p)
{
    const Index n = (Index)p.numel, step = (Index)gridDim.x * blockDim.x;
    for (Index e = (Index)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += step) {
        int64_t off[params<Op>::n_in], placed[params<Op>::n_placed];
#pragma unroll
        for (int j = 0; j < Op::n_in; ++j)
            off[j] = 0;
#pragma unroll
        for (int a = 0; a < Op::n_placed; ++a)
            placed[a] = 0;
        Index rest = e;
        for (int d = p.ndim - 1; d >= 0; --d) {
            const Index extent = (Index)p.shape[d];
            const Index c = rest % extent;
            rest /= extent;
#pragma unroll
            for (int j = 0; j < Op::n_in; ++j)
                off[j] += (int64_t)c * p.in_strides[j][d];
#pragma unroll
            for (int a = 0; a < Op::n_placed; ++a)
                placed[a] += (int64_t)c * p.out_strides[a][d];
        }
        run_element(p, off, placed, (int64_t)e);
    }
}

template <class Op> __global__ void row_kernel(const params<Op> p)
{
    typedef typename Op::real real;
    enum { L = vec16<real>::lanes };
    const uint32_t step = gridDim.x * blockDim.x;
    for (uint32_t v = blockIdx.x * blockDim.x + threadIdx.x; v < p.n_vectors; v += step) {
        const uint32_t row = v / p.vectors_per_row;
        const int64_t col = (int64_t)(v - row * p.vectors_per_row) * L;
        const int64_t e0 = (int64_t)v * L;
        real x[L][params<Op>::n_in], adj[L][params<Op>::n_adj], r[L][params<Op>::n_arr];
#pragma unroll
        for (int j = 0; j < Op::n_in; ++j) {
            const real *base = p.in[j] + (int64_t)row * p.row_stride[j];
            real lane[L];
            if (p.along_row[j]) {
                load_lanes(base + col, lane);
            } else {
#pragma unroll
                for (int l = 0; l < L; ++l)
                    lane[l] = base[0];
            }
#pragma unroll
            for (int l = 0; l < L; ++l)
                x[l][j] = lane[l];
        }
#pragma unroll
        for (int k = 0; k < Op::n_adj; ++k) {
            real lane[L];
            load_lanes(p.adj[k] + e0, lane);
#pragma unroll
            for (int l = 0; l < L; ++l)
                adj[l][k] = lane[l];
        }
#pragma unroll
        for (int l = 0; l < L; ++l)
            Op::apply(x[l], adj[l], r[l]);
#pragma unroll
        for (int a = 0; a < Op::n_arr; ++a) {
            real *to = a < Op::n_placed ? p.out[a] + (int64_t)row * p.out_row_stride[a < Op::n_placed ? a : 0] + col
                                        : p.out[a] + e0;
            real lane[L];
            if (adds(p, a))
                load_lanes(to, lane);
#pragma unroll
            for (int l = 0; l < L; ++l)
                lane[l] = adds(p, a) ? lane[l] + r[l][a] : r[l][a];
            store_lanes(to, lane);
        }
    }
}

inline bool aligned16(const void *ptr) { return ((uintptr_t)ptr & 15u) == 0; }

/* Fills the row loop's fields of p and says whether the row loop applies:
 * at most two axes, every input contiguous or constant along the inner one,
 * rows of whole 16-byte groups, every array 16-byte aligned at each row. */
template <class Op> bool plan_rows(params<Op> &p)
{
    typedef typename Op::real real;
    const int64_t lanes = vec16<real>::lanes;
    if (p.ndim > 2 || p.numel / lanes > (int64_t)INT32_MAX)
        return false;
    const int inner = p.ndim - 1;
    const int64_t cols = p.shape[inner];
    if (cols % lanes != 0)
        return false;
    for (int j = 0; j < Op::n_in; ++j) {
        const int64_t s = p.in_strides[j][inner];
        p.row_stride[j] = p.ndim == 2 ? p.in_strides[j][0] : 0;
        p.along_row[j] = s == 1;
        if (s != 0 && s != 1)
            return false;
        if (s == 1 && (!aligned16(p.in[j]) || p.row_stride[j] % lanes != 0))
            return false;
    }
    for (int k = 0; k < Op::n_adj; ++k)
        if (!aligned16(p.adj[k]))
            return false;
    for (int a = 0; a < Op::n_arr; ++a)
        if (!aligned16(p.out[a]))
            return false;
    for (int a = 0; a < Op::n_placed; ++a) {
        p.out_row_stride[a] = p.ndim == 2 ? p.out_strides[a][0] : 0;
        if (p.out_strides[a][inner] != 1 || p.out_row_stride[a] % lanes != 0)
            return false;
    }
    p.n_vectors = (uint32_t)(p.numel / lanes);
    p.vectors_per_row = (uint32_t)(cols / lanes);
    return true;
}

/* Launches the operation over L's iteration; returns a cudaError_t. */
template <class Op> int launch(const dc_bfn_cuda_launch *L)
{
    typedef typename Op::real real;
    if (L->numel == 0)
        return 0;
    params<Op> p;
    memset(&p, 0, sizeof p);
    p.numel = L->numel;
    p.ndim = L->ndim;
    for (int d = 0; d < DC_BFN_MAX_DIMS; ++d)
        p.shape[d] = L->shape[d];
    for (int j = 0; j < Op::n_in; ++j) {
        p.in[j] = (const real *)L->in[j];
        for (int d = 0; d < DC_BFN_MAX_DIMS; ++d)
            p.in_strides[j][d] = L->in_strides[j][d];
    }
    for (int k = 0; k < Op::n_adj; ++k)
        p.adj[k] = (const real *)L->adj[k];
    for (int a = 0; a < Op::n_arr; ++a)
        p.out[a] = (real *)L->out[a];
    for (int a = 0; a < Op::n_placed; ++a)
        for (int d = 0; d < DC_BFN_MAX_DIMS; ++d)
            p.out_strides[a][d] = L->out_strides[a][d];
    p.out_add = Op::n_placed > 0 ? L->out_add : 0u;
    const int block = L->block > 0 ? L->block : 256;
    const bool rows = plan_rows(p);
    const int64_t items = rows ? (int64_t)p.n_vectors : L->numel;
    int64_t blocks = (items + block - 1) / block;
    if (L->max_blocks > 0 && blocks > L->max_blocks)
        blocks = L->max_blocks;
    cudaStream_t stream = (cudaStream_t)L->stream;
    if (rows)
        row_kernel<Op><<<(unsigned)blocks, block, 0, stream>>>(p);
    else if (L->numel <= (int64_t)INT32_MAX)
        strided_kernel<Op, uint32_t><<<(unsigned)blocks, block, 0, stream>>>(p);
    else
        strided_kernel<Op, int64_t><<<(unsigned)blocks, block, 0, stream>>>(p);
    return (int)cudaGetLastError();
}

} // namespace dc_bfn_cuda

#endif /* DC_BROADCAST_BFN_CUDA_LOOPS_CUH */
