/* Checks and operand views shared by the sparse ops. */
#include <stdio.h>

#include "csr_internal.h"

dc_status dc_csr_check(dc_tape *tape, const char *op, const dc_csr *a, const dc_tensor *values)
{
    dc_ctx *ctx = tape->ctx;
    if (!a)
        return dc_error(ctx, DC_ERR_ARG, "%s: the matrix is NULL", op);
    if (a->ctx != ctx)
        return dc_error(ctx, DC_ERR_ARG, "%s: the matrix belongs to another context", op);
    if (!values)
        return DC_OK;
    char s[128];
    if (values->ndim != 1 || values->shape[0] != a->nnz)
        return dc_error(ctx, DC_ERR_SHAPE, "%s: values %s do not match the matrix's %lld entries ([%lld])", op,
                        dc_tensor_shape_str(values, s, sizeof s), (long long)a->nnz, (long long)a->nnz);
    return DC_OK;
}

dc_status dc_csr_check_operand(dc_tape *tape, const char *op, const char *label, const dc_tensor *t, dc_dtype dtype,
                               int ndim, int64_t d0, int64_t d1)
{
    char s[128], want[96];
    if (t->dtype != dtype)
        return dc_error(tape->ctx, DC_ERR_DTYPE, "%s: %s is %s but the values are %s", op, label,
                        dc_dtype_name(t->dtype), dc_dtype_name(dtype));
    const int64_t dims[2] = {d0, d1};
    bool ok = t->ndim == ndim;
    for (int d = 0; ok && d < ndim; ++d)
        ok = dims[d] < 0 || t->shape[d] == dims[d];
    if (ok)
        return DC_OK;
    if (ndim == 1)
        snprintf(want, sizeof want, "[%lld]", (long long)d0);
    else if (d1 < 0)
        snprintf(want, sizeof want, "[%lld, n]", (long long)d0);
    else
        snprintf(want, sizeof want, "[%lld, %lld]", (long long)d0, (long long)d1);
    return dc_error(tape->ctx, DC_ERR_SHAPE, "%s: %s is %s, the matrix needs %s", op, label,
                    dc_tensor_shape_str(t, s, sizeof s), want);
}

dc_dense_view dc_csr_dense_of(const dc_tensor *t)
{
    dc_dense_view v = {t->data, t->ndim > 0 ? t->strides[0] : 0, t->ndim > 1 ? t->strides[1] : 0};
    return v;
}

dc_vec_view dc_csr_vec_of(const dc_tensor *t)
{
    dc_vec_view v = {t->data, t->ndim > 0 ? t->strides[0] : 0};
    return v;
}
