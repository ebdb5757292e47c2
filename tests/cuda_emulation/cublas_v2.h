/* The part of cuBLAS the CUDA backend uses, emulated on the CPU for the
 * emulated build of the tests (see cuda_runtime.h here): GEMM, strided
 * batched or not, in column-major order, computed with plain loops in
 * double. Only the host pointer mode is emulated: alpha and beta are read
 * when the call is made, so a GEMM issued on a capturing stream records
 * their values, as cuBLAS does ("CUDA Graphs Support" in the cuBLAS guide),
 * and reads A, B and C when the graph runs. */
#ifndef DC_CUDA_EMULATION_CUBLAS_H
#define DC_CUDA_EMULATION_CUBLAS_H

#include "cuda_runtime.h"

typedef struct dc_emu_blas *cublasHandle_t;
typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_EXECUTION_FAILED = 13
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 } cublasMath_t;

cublasStatus_t cublasCreate(cublasHandle_t *handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *a, int lda, const float *b, int ldb, const float *beta,
                           float *c, int ldc);
cublasStatus_t cublasDgemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const double *alpha, const double *a, int lda, const double *b, int ldb,
                           const double *beta, double *c, int ldc);
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m,
                                         int n, int k, const float *alpha, const float *a, int lda, long long sa,
                                         const float *b, int ldb, long long sb, const float *beta, float *c, int ldc,
                                         long long sc, int batch);
cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m,
                                         int n, int k, const double *alpha, const double *a, int lda, long long sa,
                                         const double *b, int ldb, long long sb, const double *beta, double *c,
                                         int ldc, long long sc, int batch);

#endif /* DC_CUDA_EMULATION_CUBLAS_H */
