/* The sparse products cuSPARSE runs, with the algorithms its documentation
 * calls deterministic (docs/design.md, "Sparse matrices"): A x by SpMV
 * (CUSPARSE_SPMV_CSR_ALG2), A X by SpMM (CUSPARSE_SPMM_CSR_ALG3, X and the
 * result row-major), and the sampled product U V^T by SDDMM. Everything else
 * (A^T X, for which cuSPARSE promises no reproducible result, sums, strided
 * operands) stays with the library's kernels (sparse.cu). Descriptors are
 * made and destroyed per call (host structures); the workspace comes from
 * the tape, so a captured step holds no allocation; alpha and beta are host
 * values (CUSPARSE_POINTER_MODE_HOST, set with the handle). */
#include "cuda_state.h"
#include "sparse_cuda.h"

namespace
{

cudaDataType value_type(dc_dtype dtype) { return dtype == DC_F32 ? CUDA_R_32F : CUDA_R_64F; }

cusparseIndexType_t index_type(bool wide) { return wide ? CUSPARSE_INDEX_64I : CUSPARSE_INDEX_32I; }

/* The generic API asks for arrays aligned to 16 bytes. */
bool aligned(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* alpha = 1 and beta = 0 or 1 (with `add`), in the compute type */
struct scalars {
    float f[2];
    double d[2];
    bool f32;
    scalars(dc_dtype dtype, bool add) : f{1.0f, add ? 1.0f : 0.0f}, d{1.0, add ? 1.0 : 0.0}, f32(dtype == DC_F32) {}
    const void *alpha() const { return f32 ? (const void *)&f[0] : (const void *)&d[0]; }
    const void *beta() const { return f32 ? (const void *)&f[1] : (const void *)&d[1]; }
};

/* The descriptors of one call, destroyed when it returns. */
struct descriptors {
    cusparseSpMatDescr_t a = NULL;
    cusparseDnMatDescr_t b = NULL, c = NULL;
    cusparseDnVecDescr_t x = NULL, y = NULL;
    ~descriptors()
    {
        if (a)
            cusparseDestroySpMat(a);
        if (b)
            cusparseDestroyDnMat(b);
        if (c)
            cusparseDestroyDnMat(c);
        if (x)
            cusparseDestroyDnVec(x);
        if (y)
            cusparseDestroyDnVec(y);
    }
};

dc_status failed(dc_ctx *ctx, const char *what, cusparseStatus_t s)
{
    return dc_error(ctx, DC_ERR_DEVICE, "%s failed (cuSPARSE status %d)", what, (int)s);
}

/* The workspace of `bytes` from the tape (NULL for none); false when the
 * tape is out of memory (its error is set). */
bool workspace(dc_tape *tape, size_t bytes, void **buffer)
{
    *buffer = bytes ? dc_tape_alloc_data(tape, bytes) : NULL;
    return bytes == 0 || *buffer != NULL;
}

dc_status counted(dc_ctx *ctx)
{
    ctx->cuda->launches++;
    ctx->cuda->cusparse_calls++;
    return DC_OK;
}

} // namespace

dc_status dc_cusparse_mm(dc_ctx *ctx, dc_tape *tape, dc_dtype dtype, bool wide, int64_t out_rows, int64_t in_rows,
                         int64_t nnz, const void *ptr, const void *idx, const void *perm, const void *vals, int64_t vs,
                         const void *x, int64_t xr, int64_t xc, int64_t n, void *out, int64_t orow, int64_t ocol,
                         bool add, bool *taken)
{
    *taken = false;
    /* A^T (perm) is not taken: cuSPARSE's transposed products may differ
     * from run to run; nor sums (x NULL), strided values, columns not
     * contiguous, or nothing to sum */
    if (!ctx->cuda->sparse || perm || !x || vs != 1 || nnz == 0 || out_rows == 0 || in_rows == 0 || n == 0 ||
        (n > 1 && (xc != 1 || ocol != 1)) || xr < n || orow < n || !aligned(ptr) || !aligned(idx) || !aligned(vals) ||
        !aligned(x) || !aligned(out))
        return DC_OK;
    DC_CUDA_ENTER(ctx);
    cusparseHandle_t h = ctx->cuda->sparse;
    const cudaDataType vt = value_type(dtype);
    const scalars s(dtype, add);
    descriptors d;
    cusparseStatus_t st =
        cusparseCreateCsr(&d.a, out_rows, in_rows, nnz, const_cast<void *>(ptr), const_cast<void *>(idx),
                          const_cast<void *>(vals), index_type(wide), index_type(wide), CUSPARSE_INDEX_BASE_ZERO, vt);
    if (st != CUSPARSE_STATUS_SUCCESS)
        return failed(ctx, "cusparseCreateCsr", st);
    size_t bytes = 0;
    void *buffer = NULL;
    /* SpMV for a contiguous vector written anew; its ALG2 is reported to
     * ignore beta = 1 and to fail with one row or column before cuSPARSE 13
     * (docs/design.md), so those go to SpMM with one column */
    if (n == 1 && xr == 1 && orow == 1 && !add && out_rows > 1 && in_rows > 1) {
        st = cusparseCreateDnVec(&d.x, in_rows, const_cast<void *>(x), vt);
        if (st == CUSPARSE_STATUS_SUCCESS)
            st = cusparseCreateDnVec(&d.y, out_rows, out, vt);
        if (st != CUSPARSE_STATUS_SUCCESS)
            return failed(ctx, "cusparseCreateDnVec", st);
        st = cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, s.alpha(), d.a, d.x, s.beta(), d.y, vt,
                                     CUSPARSE_SPMV_CSR_ALG2, &bytes);
        if (st == CUSPARSE_STATUS_NOT_SUPPORTED)
            return DC_OK;
        if (st != CUSPARSE_STATUS_SUCCESS)
            return failed(ctx, "cusparseSpMV_bufferSize", st);
        if (!workspace(tape, bytes, &buffer))
            return DC_ERR_MEMORY;
        st = cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, s.alpha(), d.a, d.x, s.beta(), d.y, vt,
                          CUSPARSE_SPMV_CSR_ALG2, buffer);
        if (st == CUSPARSE_STATUS_NOT_SUPPORTED) /* the layout refused: the kernel runs */
            return DC_OK;
        if (st != CUSPARSE_STATUS_SUCCESS)
            return failed(ctx, "cusparseSpMV", st);
        *taken = true;
        return counted(ctx);
    }
    st = cusparseCreateDnMat(&d.b, in_rows, n, xr, const_cast<void *>(x), vt, CUSPARSE_ORDER_ROW);
    if (st == CUSPARSE_STATUS_SUCCESS)
        st = cusparseCreateDnMat(&d.c, out_rows, n, orow, out, vt, CUSPARSE_ORDER_ROW);
    if (st != CUSPARSE_STATUS_SUCCESS)
        return failed(ctx, "cusparseCreateDnMat", st);
    st = cusparseSpMM_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, s.alpha(), d.a,
                                 d.b, s.beta(), d.c, vt, CUSPARSE_SPMM_CSR_ALG3, &bytes);
    if (st == CUSPARSE_STATUS_NOT_SUPPORTED)
        return DC_OK;
    if (st != CUSPARSE_STATUS_SUCCESS)
        return failed(ctx, "cusparseSpMM_bufferSize", st);
    if (!workspace(tape, bytes, &buffer))
        return DC_ERR_MEMORY;
    st = cusparseSpMM(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, s.alpha(), d.a, d.b,
                      s.beta(), d.c, vt, CUSPARSE_SPMM_CSR_ALG3, buffer);
    if (st == CUSPARSE_STATUS_NOT_SUPPORTED) /* the layout refused: the kernel runs */
        return DC_OK;
    if (st != CUSPARSE_STATUS_SUCCESS)
        return failed(ctx, "cusparseSpMM", st);
    *taken = true;
    return counted(ctx);
}

dc_status dc_cusparse_sddmm(dc_ctx *ctx, dc_tape *tape, dc_dtype dtype, bool wide, int64_t rows, int64_t cols,
                            int64_t nnz, const void *row_ptr, const void *col_idx, const void *u, int64_t ur,
                            int64_t uc, const void *v, int64_t vr, int64_t vc, int64_t n, void *out, int64_t os,
                            bool add, bool *taken)
{
    *taken = false;
    /* gathers (u or v NULL) and strided operands stay with the kernel */
    if (!ctx->cuda->sparse || !u || !v || os != 1 || nnz == 0 || n == 0 || (n > 1 && (uc != 1 || vc != 1)) || ur < n ||
        vr < n || !aligned(row_ptr) || !aligned(col_idx) || !aligned(u) || !aligned(v) || !aligned(out))
        return DC_OK;
    DC_CUDA_ENTER(ctx);
    cusparseHandle_t h = ctx->cuda->sparse;
    const cudaDataType vt = value_type(dtype);
    const scalars s(dtype, add);
    descriptors d;
    /* out[p] = sum over c of U[i, c] V[j, c]: U (rows x n) times op(V) = V^T
     * (n x cols), sampled at the pattern, whose values are out */
    cusparseStatus_t st =
        cusparseCreateCsr(&d.a, rows, cols, nnz, const_cast<void *>(row_ptr), const_cast<void *>(col_idx), out,
                          index_type(wide), index_type(wide), CUSPARSE_INDEX_BASE_ZERO, vt);
    if (st != CUSPARSE_STATUS_SUCCESS)
        return failed(ctx, "cusparseCreateCsr", st);
    st = cusparseCreateDnMat(&d.b, rows, n, ur, const_cast<void *>(u), vt, CUSPARSE_ORDER_ROW);
    if (st == CUSPARSE_STATUS_SUCCESS)
        st = cusparseCreateDnMat(&d.c, cols, n, vr, const_cast<void *>(v), vt, CUSPARSE_ORDER_ROW);
    if (st != CUSPARSE_STATUS_SUCCESS)
        return failed(ctx, "cusparseCreateDnMat", st);
    size_t bytes = 0;
    void *buffer = NULL;
    st = cusparseSDDMM_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_TRANSPOSE, s.alpha(), d.b,
                                  d.c, s.beta(), d.a, vt, CUSPARSE_SDDMM_ALG_DEFAULT, &bytes);
    if (st == CUSPARSE_STATUS_NOT_SUPPORTED)
        return DC_OK;
    if (st != CUSPARSE_STATUS_SUCCESS)
        return failed(ctx, "cusparseSDDMM_bufferSize", st);
    if (!workspace(tape, bytes, &buffer))
        return DC_ERR_MEMORY;
    st = cusparseSDDMM(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_TRANSPOSE, s.alpha(), d.b, d.c, s.beta(),
                       d.a, vt, CUSPARSE_SDDMM_ALG_DEFAULT, buffer);
    if (st == CUSPARSE_STATUS_NOT_SUPPORTED) /* the layout refused: the kernel runs */
        return DC_OK;
    if (st != CUSPARSE_STATUS_SUCCESS)
        return failed(ctx, "cusparseSDDMM", st);
    *taken = true;
    return counted(ctx);
}
