/* The arity sweep's hand-fused kernel; see prod_sign_fused_cuda.h. */
#include "prod_sign_fused_cuda.h"

#include <cuda_runtime.h>

static const int kBlock = 256;

/* Passed by value: the kernel's parameters hold every pointer. */
struct prod_sign_arrays {
    const float *x[PROD_SIGN_MAX_ARITY];
    float *grad[PROD_SIGN_MAX_ARITY];
    const float *adj;
    float *out;
};

/* The gradient of x_j is adj * s'(x_j) * (product of the other factors).
 * Products of the factors before j (prefix) and after j (suffix) give every
 * one of them in 2 * K multiplications and without dividing, which would
 * fail where a factor is zero. Arity is a template parameter so that the
 * factors stay in registers. */
template <int K> static __global__ void prod_sign_fused_kernel(int64_t n, prod_sign_arrays p)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
        float s[K], sign[K], prefix[K];
#pragma unroll
        for (int j = 0; j < K; ++j) {
            const float x = p.x[j][e];
            sign[j] = x > 0.5f ? 1.0f : -1.0f;
            s[j] = sign[j] * x;
        }
        prefix[0] = 1.0f;
#pragma unroll
        for (int j = 1; j < K; ++j)
            prefix[j] = prefix[j - 1] * s[j - 1];
        const float a = p.adj[e];
        float suffix = 1.0f;
#pragma unroll
        for (int j = K - 1; j >= 0; --j) {
            p.grad[j][e] = a * sign[j] * (prefix[j] * suffix);
            suffix *= s[j];
        }
        p.out[e] = prefix[K - 1] * s[K - 1];
    }
}

template <int K> static int launch(int64_t n, const prod_sign_arrays &p, cudaStream_t stream)
{
    int device = 0, sms = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    /* enough blocks to fill every SM many times over; the loop covers the rest */
    int64_t blocks = (n + kBlock - 1) / kBlock;
    const int64_t cap = 32 * (int64_t)(sms > 0 ? sms : 132);
    if (blocks > cap)
        blocks = cap;
    prod_sign_fused_kernel<K><<<(unsigned)blocks, kBlock, 0, stream>>>(n, p);
    return (int)cudaGetLastError();
}

extern "C" int prod_sign_fused_cuda(int arity, int64_t n, const float *const *x, const float *adj, float *out,
                                    float *const *grad, void *stream)
{
    if (arity < 1 || arity > PROD_SIGN_MAX_ARITY)
        return (int)cudaErrorInvalidValue;
    if (n <= 0)
        return (int)cudaSuccess;
    prod_sign_arrays p = {};
    for (int j = 0; j < arity; ++j) {
        p.x[j] = x[j];
        p.grad[j] = grad[j];
    }
    p.adj = adj;
    p.out = out;
    cudaStream_t s = (cudaStream_t)stream;
    switch (arity) {
    case 1:
        return launch<1>(n, p, s);
    case 2:
        return launch<2>(n, p, s);
    case 3:
        return launch<3>(n, p, s);
    case 4:
        return launch<4>(n, p, s);
    case 5:
        return launch<5>(n, p, s);
    case 6:
        return launch<6>(n, p, s);
    case 7:
        return launch<7>(n, p, s);
    case 8:
        return launch<8>(n, p, s);
    case 9:
        return launch<9>(n, p, s);
    default:
        return launch<10>(n, p, s);
    }
}
