/* Host/device qualifiers shared by every header in dual/ and broadcast/.
 *
 * The scalar and dual-number math is written once and compiled three ways:
 * as C11 for the CPU, as CUDA C++ host code and as CUDA device code. These
 * macros hide the differences between those three compilers. */
#ifndef DC_DUAL_HD_H
#define DC_DUAL_HD_H

#if defined(__CUDACC__)
#define DC_HD __host__ __device__
#define DC_DEVICE_CODE_POSSIBLE 1
#else
#define DC_HD
#define DC_DEVICE_CODE_POSSIBLE 0
#endif

/* True only in the device pass of nvcc: use CUDA's math there. */
#if defined(__CUDA_ARCH__)
#define DC_ON_DEVICE 1
#else
#define DC_ON_DEVICE 0
#endif

/* Every small math function must inline into the element loop: the
 * vectorizer and scalar replacement of the dual structs both depend on it. */
#if defined(__CUDACC__)
#define DC_INLINE static __forceinline__
#elif defined(__GNUC__)
#define DC_INLINE static inline __attribute__((always_inline))
#else
#define DC_INLINE static inline
#endif

/* Fully unrolls the loop that follows, for loops over a compile-time number
 * of partials, inputs or outputs: unrolled, the dual structs become
 * registers and the element loop around them vectorizes. */
#if defined(__CUDACC__) || defined(__clang__)
#define DC_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define DC_UNROLL _Pragma("GCC unroll 64")
#else
#define DC_UNROLL
#endif

/* True where the compiler can prove, once the code is inlined, that x is
 * zero; false where it cannot, and always false without optimization and in
 * nvcc's device pass, which has no such test. Never evaluates x at run time:
 * the dual-number math uses it to drop partials that are zero by
 * construction at no cost to the others. */
#if defined(__GNUC__) && !defined(__CUDA_ARCH__)
#define DC_KNOWN_ZERO(x) (__builtin_constant_p(x) && (x) == 0)
#else
#define DC_KNOWN_ZERO(x) 0
#endif

#if defined(__cplusplus)
#define DC_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define DC_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

#endif /* DC_DUAL_HD_H */
