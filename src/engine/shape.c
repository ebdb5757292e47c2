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

void dc_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; --d) {
        strides[d] = s;
        s *= shape[d] > 0 ? shape[d] : 1;
    }
}

int64_t dc_shape_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d)
        n *= shape[d];
    return n;
}

bool dc_strides_contiguous(int ndim, const int64_t *shape, const int64_t *strides)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; --d) {
        if (shape[d] != 1 && strides[d] != s)
            return false;
        s *= shape[d];
    }
    return true;
}
