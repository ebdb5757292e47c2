/* 16 bytes of a scalar type, the widest load or store a thread makes at
 * once: float4 for float, double2 for double. */
#ifndef DC_CUDA_VEC16_CUH
#define DC_CUDA_VEC16_CUH

#include <cuda_runtime.h>

namespace dc_cuda {

template <typename T> struct vec16;
template <> struct vec16<float> {
    using type = float4;
    static constexpr int n = 4;
};
template <> struct vec16<double> {
    using type = double2;
    static constexpr int n = 2;
};

} // namespace dc_cuda

#endif /* DC_CUDA_VEC16_CUH */
