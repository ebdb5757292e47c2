/* The part of cuSPARSE's generic API the CUDA backend uses
 * (src/cuda/sparse_cusparse.cu), emulated on the CPU for the emulated build
 * of the tests: CSR, dense matrix and dense vector descriptors, SpMV, SpMM
 * and SDDMM with the algorithms the backend names. Each output element is
 * one sum over the pattern's order (SpMV, SpMM) or over the shared dimension
 * (SDDMM), in the value type, as the library's own kernels sum, so results
 * can be compared bit for bit with the CPU's. Only the host pointer mode is
 * emulated: alpha and beta are read when a call is made, so a call on a
 * capturing stream records their values and reads the operands when the
 * graph runs. Arguments are checked as the documentation states: sizes that
 * do not agree, a leading dimension below the row length, an array not
 * aligned to 16 bytes, a missing workspace or an algorithm or operation the
 * backend does not use give CUSPARSE_STATUS_INVALID_VALUE (the last
 * CUSPARSE_STATUS_NOT_SUPPORTED); the workspace asked for is 256 bytes, so
 * the backend's workspace path runs. With DC_EMU_CUSPARSE_REFUSE=1 in the
 * environment every _bufferSize call answers CUSPARSE_STATUS_NOT_SUPPORTED
 * (after its checks), as cuSPARSE does for a layout an algorithm lacks. */
#ifndef DC_CUDA_EMULATION_CUSPARSE_H
#define DC_CUDA_EMULATION_CUSPARSE_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_runtime.h"

typedef enum { CUDA_R_32F = 0, CUDA_R_64F = 1 } cudaDataType;

typedef struct dc_emu_sparse *cusparseHandle_t;
typedef struct dc_emu_sp_mat *cusparseSpMatDescr_t;
typedef const struct dc_emu_sp_mat *cusparseConstSpMatDescr_t;
typedef struct dc_emu_dn_mat *cusparseDnMatDescr_t;
typedef const struct dc_emu_dn_mat *cusparseConstDnMatDescr_t;
typedef struct dc_emu_dn_vec *cusparseDnVecDescr_t;
typedef const struct dc_emu_dn_vec *cusparseConstDnVecDescr_t;

typedef enum {
    CUSPARSE_STATUS_SUCCESS = 0,
    CUSPARSE_STATUS_INVALID_VALUE = 3,
    CUSPARSE_STATUS_EXECUTION_FAILED = 6,
    CUSPARSE_STATUS_NOT_SUPPORTED = 10
} cusparseStatus_t;
typedef enum { CUSPARSE_POINTER_MODE_HOST = 0, CUSPARSE_POINTER_MODE_DEVICE = 1 } cusparsePointerMode_t;
typedef enum { CUSPARSE_OPERATION_NON_TRANSPOSE = 0, CUSPARSE_OPERATION_TRANSPOSE = 1 } cusparseOperation_t;
typedef enum { CUSPARSE_INDEX_BASE_ZERO = 0 } cusparseIndexBase_t;
typedef enum { CUSPARSE_INDEX_32I = 2, CUSPARSE_INDEX_64I = 3 } cusparseIndexType_t;
typedef enum { CUSPARSE_ORDER_ROW = 2 } cusparseOrder_t;
typedef enum { CUSPARSE_SPMV_CSR_ALG2 = 3 } cusparseSpMVAlg_t;
typedef enum { CUSPARSE_SPMM_CSR_ALG3 = 12 } cusparseSpMMAlg_t;
typedef enum { CUSPARSE_SDDMM_ALG_DEFAULT = 0 } cusparseSDDMMAlg_t;

#ifdef __cplusplus
extern "C" {
#endif

cusparseStatus_t cusparseCreate(cusparseHandle_t *handle);
cusparseStatus_t cusparseDestroy(cusparseHandle_t handle);
cusparseStatus_t cusparseSetStream(cusparseHandle_t handle, cudaStream_t stream);
cusparseStatus_t cusparseSetPointerMode(cusparseHandle_t handle, cusparsePointerMode_t mode);

cusparseStatus_t cusparseCreateCsr(cusparseSpMatDescr_t *descr, int64_t rows, int64_t cols, int64_t nnz,
                                   void *row_offsets, void *col_ind, void *values, cusparseIndexType_t row_type,
                                   cusparseIndexType_t col_type, cusparseIndexBase_t base, cudaDataType value_type);
cusparseStatus_t cusparseDestroySpMat(cusparseConstSpMatDescr_t descr);
cusparseStatus_t cusparseCreateDnMat(cusparseDnMatDescr_t *descr, int64_t rows, int64_t cols, int64_t ld, void *values,
                                     cudaDataType value_type, cusparseOrder_t order);
cusparseStatus_t cusparseDestroyDnMat(cusparseConstDnMatDescr_t descr);
cusparseStatus_t cusparseCreateDnVec(cusparseDnVecDescr_t *descr, int64_t size, void *values, cudaDataType value_type);
cusparseStatus_t cusparseDestroyDnVec(cusparseConstDnVecDescr_t descr);

cusparseStatus_t cusparseSpMV_bufferSize(cusparseHandle_t handle, cusparseOperation_t op_a, const void *alpha,
                                         cusparseConstSpMatDescr_t a, cusparseConstDnVecDescr_t x, const void *beta,
                                         cusparseDnVecDescr_t y, cudaDataType compute_type, cusparseSpMVAlg_t alg,
                                         size_t *bytes);
cusparseStatus_t cusparseSpMV(cusparseHandle_t handle, cusparseOperation_t op_a, const void *alpha,
                              cusparseConstSpMatDescr_t a, cusparseConstDnVecDescr_t x, const void *beta,
                              cusparseDnVecDescr_t y, cudaDataType compute_type, cusparseSpMVAlg_t alg, void *buffer);
cusparseStatus_t cusparseSpMM_bufferSize(cusparseHandle_t handle, cusparseOperation_t op_a, cusparseOperation_t op_b,
                                         const void *alpha, cusparseConstSpMatDescr_t a, cusparseConstDnMatDescr_t b,
                                         const void *beta, cusparseDnMatDescr_t c, cudaDataType compute_type,
                                         cusparseSpMMAlg_t alg, size_t *bytes);
cusparseStatus_t cusparseSpMM(cusparseHandle_t handle, cusparseOperation_t op_a, cusparseOperation_t op_b,
                              const void *alpha, cusparseConstSpMatDescr_t a, cusparseConstDnMatDescr_t b,
                              const void *beta, cusparseDnMatDescr_t c, cudaDataType compute_type,
                              cusparseSpMMAlg_t alg, void *buffer);
cusparseStatus_t cusparseSDDMM_bufferSize(cusparseHandle_t handle, cusparseOperation_t op_a, cusparseOperation_t op_b,
                                          const void *alpha, cusparseConstDnMatDescr_t a, cusparseConstDnMatDescr_t b,
                                          const void *beta, cusparseSpMatDescr_t c, cudaDataType compute_type,
                                          cusparseSDDMMAlg_t alg, size_t *bytes);
cusparseStatus_t cusparseSDDMM(cusparseHandle_t handle, cusparseOperation_t op_a, cusparseOperation_t op_b,
                               const void *alpha, cusparseConstDnMatDescr_t a, cusparseConstDnMatDescr_t b,
                               const void *beta, cusparseSpMatDescr_t c, cudaDataType compute_type,
                               cusparseSDDMMAlg_t alg, void *buffer);

#ifdef __cplusplus
}
#endif

#endif /* DC_CUDA_EMULATION_CUSPARSE_H */
