#include "coalesce.h"

void dc_coalesce(int ndim, const int64_t *shape, int n_arrays, const int64_t *const *strides, int *out_ndim,
                 int64_t *out_shape, int64_t (*out_strides)[DC_MAX_DIMS])
{
    int nd = 0;
    for (int d = 0; d < ndim; ++d) {
        if (shape[d] == 1)
            continue;
        /* axis d-1 of the result can absorb axis d when, for every array,
         * stepping the outer axis equals stepping the inner one shape[d] times */
        bool merge = nd > 0;
        for (int a = 0; a < n_arrays && merge; ++a)
            merge = out_strides[a][nd - 1] == strides[a][d] * shape[d];
        if (merge) {
            out_shape[nd - 1] *= shape[d];
            for (int a = 0; a < n_arrays; ++a)
                out_strides[a][nd - 1] = strides[a][d];
        } else {
            out_shape[nd] = shape[d];
            for (int a = 0; a < n_arrays; ++a)
                out_strides[a][nd] = strides[a][d];
            ++nd;
        }
    }
    if (nd == 0) {
        nd = 1;
        out_shape[0] = 1;
        for (int a = 0; a < n_arrays; ++a)
            out_strides[a][0] = 0;
    }
    *out_ndim = nd;
}
