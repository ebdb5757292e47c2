/* The binary search of the CUDA kernels: where a value falls in an
 * ascending array of indices (a segment's rows, grouped ids). */
#ifndef DC_CUDA_SORTED_SEARCH_CUH
#define DC_CUDA_SORTED_SEARCH_CUH

#include <stdint.h>

namespace dc_cuda {

/* The first index in [lo, hi) of the ascending array a whose element is at
 * least v; hi if there is none. */
__device__ __forceinline__ int64_t lower_bound(const int64_t *a, int64_t lo, int64_t hi, int64_t v)
{
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

} // namespace dc_cuda

#endif /* DC_CUDA_SORTED_SEARCH_CUH */
