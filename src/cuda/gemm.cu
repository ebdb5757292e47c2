/* Matrix products through cuBLAS. cuBLAS is column-major: a row-major
 * product C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T, which is the
 * same memory read as column-major, with the operands swapped. */
#include "cuda_state.h"

extern "C" dc_status dc_cuda_gemm(dc_ctx *ctx, dc_dtype dtype, bool ta, bool tb, int m, int n, int k, const void *a,
                                  int64_t lda, int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
                                  double beta, void *c, int64_t ldc, int64_t stride_c, int batch)
{
    DC_CUDA_ENTER(ctx);
    if (m == 0 || n == 0 || batch == 0)
        return DC_OK;
    cublasHandle_t h = ctx->cuda->blas;
    ctx->cuda->launches++;
    const cublasOperation_t op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t s;
    if (dtype == DC_F32) {
        const float one = 1.0f, bf = (float)beta;
        s = cublasSgemmStridedBatched(h, op_b, op_a, n, m, k, &one, (const float *)b, (int)ldb, stride_b,
                                      (const float *)a, (int)lda, stride_a, &bf, (float *)c, (int)ldc, stride_c, batch);
    } else {
        const double one = 1.0;
        s = cublasDgemmStridedBatched(h, op_b, op_a, n, m, k, &one, (const double *)b, (int)ldb, stride_b,
                                      (const double *)a, (int)lda, stride_a, &beta, (double *)c, (int)ldc, stride_c,
                                      batch);
    }
    return s == CUBLAS_STATUS_SUCCESS ? DC_OK
                                      : dc_error(ctx, DC_ERR_DEVICE, "cuBLAS gemm failed (status %d)", (int)s);
}
