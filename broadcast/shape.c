#include "shape.h"

#include <string.h>

bool dc_broadcast_shape(int n, const int *ndims, const int64_t *const *shapes, int *out_ndim,
                        int64_t *out_shape, int *bad_i, int *bad_j, int *bad_axis)
{
    int nd = 0;
    for (int i = 0; i < n; ++i)
        nd = ndims[i] > nd ? ndims[i] : nd;
    for (int a = 1; a <= nd; ++a) {
        int64_t size = 1;
        int owner = -1; /* the operand that set `size`, when it is not 1 */
        for (int i = 0; i < n; ++i) {
            if (ndims[i] < a)
                continue;
            int64_t s = shapes[i][ndims[i] - a];
            if (s == 1)
                continue;
            if (owner < 0) {
                size = s;
                owner = i;
            } else if (s != size) {
                *bad_i = owner;
                *bad_j = i;
                *bad_axis = -a;
                return false;
            }
        }
        out_shape[nd - a] = size;
    }
    *out_ndim = nd;
    return true;
}

void dc_broadcast_strides(int t_ndim, const int64_t *t_shape, const int64_t *t_strides, int ndim,
                          const int64_t *shape, int64_t *strides)
{
    for (int d = 0; d < ndim; ++d) {
        int td = d - (ndim - t_ndim);
        strides[d] = (td < 0 || t_shape[td] == 1 || shape[d] == 1) ? 0 : t_strides[td];
    }
}

dc_status dc_broadcast_check(dc_ctx *ctx, const char *op, int n, dc_tensor *const *tensors,
                             const char *const *labels, int *out_ndim, int64_t *out_shape)
{
    int ndims[DC_BFN_MAX_INPUTS];
    const int64_t *shapes[DC_BFN_MAX_INPUTS];
    for (int i = 0; i < n; ++i) {
        if (!tensors[i])
            return DC_ERR_ARG; /* reported by the caller */
        ndims[i] = tensors[i]->ndim;
        shapes[i] = tensors[i]->shape;
        if (tensors[i]->dtype != tensors[0]->dtype)
            return dc_error(ctx, DC_ERR_DTYPE, "%s: %s is %s but %s is %s; convert one of them", op,
                            labels[0], dc_dtype_name(tensors[0]->dtype), labels[i],
                            dc_dtype_name(tensors[i]->dtype));
    }
    int bi, bj, axis;
    if (!dc_broadcast_shape(n, ndims, shapes, out_ndim, out_shape, &bi, &bj, &axis)) {
        char sa[128], sb[128];
        dc_shape_format(sa, sizeof sa, ndims[bi], shapes[bi]);
        dc_shape_format(sb, sizeof sb, ndims[bj], shapes[bj]);
        return dc_error(ctx, DC_ERR_SHAPE,
                        "%s: shapes do not broadcast: %s %s and %s %s differ at axis %d (%lld vs %lld)", op,
                        labels[bi], sa, labels[bj], sb, axis, (long long)shapes[bi][ndims[bi] + axis],
                        (long long)shapes[bj][ndims[bj] + axis]);
    }
    return DC_OK;
}
