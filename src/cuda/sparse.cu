/* Device kernels of the sparse ops: a thread per output element (a row and
 * column of a product, an entry of a sampled product or a gather), each
 * summing in the pattern's order, so no two threads write one element and
 * nothing needs atomics. Products with A^T read the pattern's column order
 * (the transpose's CSR with the permutation to A's entries). */
#include "block_reduce.cuh"
#include "sparse_cuda.h"

using dc_cuda::grid_for;
using dc_cuda::kBlock;

namespace
{

/* The row of entry p: the last i < rows with ptr[i] <= p. */
template <typename I> __device__ int64_t row_of(const I *ptr, int64_t rows, int64_t p)
{
    int64_t lo = 0, hi = rows;
    while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        if ((int64_t)ptr[mid] <= p)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

template <typename T, typename I>
__global__ void csr_mm(int64_t out_rows, const I *ptr, const I *idx, const I *perm, const T *vals, int64_t vs,
                       const T *x, int64_t xr, int64_t xc, int64_t n, T *out, int64_t orow, int64_t ocol, bool add)
{
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < out_rows * n;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = t / n, c = t % n;
        T acc = 0;
        for (int64_t p = ptr[i]; p < (int64_t)ptr[i + 1]; ++p) {
            const int64_t e = perm ? (int64_t)perm[p] : p;
            acc += vals[e * vs] * (x ? x[(int64_t)idx[p] * xr + c * xc] : (T)1);
        }
        T *o = out + i * orow + c * ocol;
        *o = add ? *o + acc : acc;
    }
}

template <typename T, typename I>
__global__ void csr_sddmm(int64_t rows, int64_t nnz, const I *row_ptr, const I *col_idx, const T *u, int64_t ur,
                          int64_t uc, const T *v, int64_t vr, int64_t vc, int64_t n, T *out, int64_t os, bool add)
{
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < nnz; p += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = row_of(row_ptr, rows, p), j = col_idx[p];
        T acc = 0;
        for (int64_t c = 0; c < n; ++c)
            acc += (u ? u[i * ur + c * uc] : (T)1) * (v ? v[j * vr + c * vc] : (T)1);
        T *o = out + p * os;
        *o = add ? *o + acc : acc;
    }
}

template <typename T, typename I>
__global__ void csr_permute(int64_t nnz, const I *perm, bool scatter, const T *in, int64_t is, T *out, int64_t os,
                            bool add)
{
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < nnz; p += (int64_t)gridDim.x * blockDim.x) {
        const int64_t e = perm[p], from = scatter ? p : e, to = scatter ? e : p;
        T *o = out + to * os;
        *o = add ? *o + in[from * is] : in[from * is];
    }
}

template <typename T> __global__ void zero_matrix(int64_t rows, int64_t cols, T *d, int64_t dr, int64_t dc)
{
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < rows * cols;
         t += (int64_t)gridDim.x * blockDim.x)
        d[(t / cols) * dr + (t % cols) * dc] = 0;
}

/* each entry's position is its own: the writes never meet */
template <typename T, typename I>
__global__ void csr_dense(bool to_dense, int64_t rows, int64_t nnz, const I *row_ptr, const I *col_idx, T *vals,
                          int64_t vs, T *d, int64_t dr, int64_t dc, bool add)
{
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < nnz; p += (int64_t)gridDim.x * blockDim.x) {
        T *x = d + row_of(row_ptr, rows, p) * dr + (int64_t)col_idx[p] * dc;
        T *y = vals + p * vs;
        T *o = to_dense ? x : y;
        const T in = to_dense ? *y : *x;
        *o = add ? *o + in : in;
    }
}

template <typename T, typename I>
void launch_mm(dc_ctx *ctx, int64_t out_rows, const void *ptr, const void *idx, const void *perm, const void *vals,
               int64_t vs, const void *x, int64_t xr, int64_t xc, int64_t n, void *out, int64_t orow, int64_t ocol,
               bool add)
{
    csr_mm<T, I><<<grid_for(ctx, out_rows * n), kBlock, 0, ctx->cuda->stream>>>(
        out_rows, (const I *)ptr, (const I *)idx, (const I *)perm, (const T *)vals, vs, (const T *)x, xr, xc, n,
        (T *)out, orow, ocol, add);
}

template <typename T, typename I>
void launch_sddmm(dc_ctx *ctx, int64_t rows, int64_t nnz, const void *row_ptr, const void *col_idx, const void *u,
                  int64_t ur, int64_t uc, const void *v, int64_t vr, int64_t vc, int64_t n, void *out, int64_t os,
                  bool add)
{
    csr_sddmm<T, I><<<grid_for(ctx, nnz), kBlock, 0, ctx->cuda->stream>>>(rows, nnz, (const I *)row_ptr,
                                                                          (const I *)col_idx, (const T *)u, ur, uc,
                                                                          (const T *)v, vr, vc, n, (T *)out, os, add);
}

template <typename T, typename I>
void launch_permute(dc_ctx *ctx, int64_t nnz, const void *perm, bool scatter, const void *in, int64_t is, void *out,
                    int64_t os, bool add)
{
    csr_permute<T, I><<<grid_for(ctx, nnz), kBlock, 0, ctx->cuda->stream>>>(nnz, (const I *)perm, scatter,
                                                                            (const T *)in, is, (T *)out, os, add);
}

template <typename T, typename I>
int launch_dense(dc_ctx *ctx, bool to_dense, int64_t rows, int64_t cols, int64_t nnz, const void *row_ptr,
                 const void *col_idx, void *vals, int64_t vs, void *d, int64_t dr, int64_t dc, bool add)
{
    int launches = 0;
    if (to_dense && !add && rows * cols > 0) {
        zero_matrix<T><<<grid_for(ctx, rows * cols), kBlock, 0, ctx->cuda->stream>>>(rows, cols, (T *)d, dr, dc);
        ++launches;
    }
    if (nnz > 0) {
        csr_dense<T, I><<<grid_for(ctx, nnz), kBlock, 0, ctx->cuda->stream>>>(
            to_dense, rows, nnz, (const I *)row_ptr, (const I *)col_idx, (T *)vals, vs, (T *)d, dr, dc, add);
        ++launches;
    }
    return launches;
}

} // namespace

/* The instantiation for the dtype and the index width. */
#define DC_SPARSE_DISPATCH(fn, ...)                                                                                    \
    do {                                                                                                               \
        if (dtype == DC_F32)                                                                                           \
            wide ? fn<float, int64_t>(__VA_ARGS__) : fn<float, int32_t>(__VA_ARGS__);                                  \
        else                                                                                                           \
            wide ? fn<double, int64_t>(__VA_ARGS__) : fn<double, int32_t>(__VA_ARGS__);                                \
    } while (0)

dc_status dc_cuda_csr_mm(dc_ctx *ctx, dc_dtype dtype, bool wide, int64_t out_rows, const void *ptr, const void *idx,
                         const void *perm, const void *vals, int64_t vs, const void *x, int64_t xr, int64_t xc,
                         int64_t n, void *out, int64_t orow, int64_t ocol, bool add)
{
    DC_CUDA_ENTER(ctx);
    if (out_rows * n == 0)
        return DC_OK;
    DC_SPARSE_DISPATCH(launch_mm, ctx, out_rows, ptr, idx, perm, vals, vs, x, xr, xc, n, out, orow, ocol, add);
    return dc_cuda_launched(ctx, 1, "sparse product");
}

dc_status dc_cuda_csr_sddmm(dc_ctx *ctx, dc_dtype dtype, bool wide, int64_t rows, int64_t nnz, const void *row_ptr,
                            const void *col_idx, const void *u, int64_t ur, int64_t uc, const void *v, int64_t vr,
                            int64_t vc, int64_t n, void *out, int64_t os, bool add)
{
    DC_CUDA_ENTER(ctx);
    if (nnz == 0)
        return DC_OK;
    DC_SPARSE_DISPATCH(launch_sddmm, ctx, rows, nnz, row_ptr, col_idx, u, ur, uc, v, vr, vc, n, out, os, add);
    return dc_cuda_launched(ctx, 1, "sampled dense-dense product");
}

dc_status dc_cuda_csr_permute(dc_ctx *ctx, dc_dtype dtype, bool wide, int64_t nnz, const void *perm, bool scatter,
                              const void *in, int64_t is, void *out, int64_t os, bool add)
{
    DC_CUDA_ENTER(ctx);
    if (nnz == 0)
        return DC_OK;
    DC_SPARSE_DISPATCH(launch_permute, ctx, nnz, perm, scatter, in, is, out, os, add);
    return dc_cuda_launched(ctx, 1, "sparse values permutation");
}

dc_status dc_cuda_csr_dense(dc_ctx *ctx, dc_dtype dtype, bool wide, bool to_dense, int64_t rows, int64_t cols,
                            int64_t nnz, const void *row_ptr, const void *col_idx, void *vals, int64_t vs, void *d,
                            int64_t dr, int64_t dc, bool add)
{
    DC_CUDA_ENTER(ctx);
    int launches = 0;
    if (dtype == DC_F32)
        launches = wide ? launch_dense<float, int64_t>(ctx, to_dense, rows, cols, nnz, row_ptr, col_idx, vals, vs, d,
                                                       dr, dc, add)
                        : launch_dense<float, int32_t>(ctx, to_dense, rows, cols, nnz, row_ptr, col_idx, vals, vs, d,
                                                       dr, dc, add);
    else
        launches = wide ? launch_dense<double, int64_t>(ctx, to_dense, rows, cols, nnz, row_ptr, col_idx, vals, vs, d,
                                                        dr, dc, add)
                        : launch_dense<double, int32_t>(ctx, to_dense, rows, cols, nnz, row_ptr, col_idx, vals, vs, d,
                                                        dr, dc, add);
    return launches ? dc_cuda_launched(ctx, launches, "sparse to and from dense") : DC_OK;
}
