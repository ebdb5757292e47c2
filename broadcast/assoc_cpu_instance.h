/* Instantiates one associative operator's CPU kernels for one scalar type.
 * A generated unit (cmake/DualcastAssocFn.cmake) defines
 *
 *   DC_ASSOC_NAME        the operator's name (must match its DC_ASSOC)
 *   DC_BFN_FILE          the body's file, as a string
 *   DC_BFN_BITS          32 or 64
 *   DC_ASSOC_DESCRIPTOR  (optional) also define the dc_assoc descriptor
 *   DC_ASSOC_WITH_CUDA   (optional) the descriptor points at CUDA launchers
 *
 * then includes this file, which compiles the body twice: the primal pass
 * (plain numbers: the scan kernel) and the dual pass (dual numbers with one
 * partial per field of both operands, 2k in all: the vector-Jacobian and
 * scan-adjoint and reduce-adjoint kernels). The kernels are named
 * dc_assock_<name>_<sfx>_{scan,vjp,scan_adjoint,reduce_adjoint} and have the signatures of
 * include/dualcast/assoc_abi.h. */

#include <math.h>
#include <stdint.h>

#include "../dual/scalar_math.h"
#include "assoc_macros.h"
#include "tiles8.h"
#include <dualcast/assoc_abi.h>

/* The gradients' guards and the check that picks them (assoc_kernels.h,
 * dc_assoc_adj_mul, dc_assoc_all_finite) test for infinities and NaN, which
 * -ffinite-math-only (and -ffast-math) would assume away. */
#if defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__
#error "an associative operator's kernels need infinities and NaN: compile them without -ffinite-math-only or -ffast-math"
#endif

#if DC_BFN_BITS == 32
#define DC_S float
#define DC_SFX f32
#elif DC_BFN_BITS == 64
#define DC_S double
#define DC_SFX f64
#else
#error "DC_BFN_BITS must be 32 or 64"
#endif

#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpass-failed"
#define DC_ASSOC_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define DC_ASSOC_IVDEP _Pragma("GCC ivdep")
#endif

#define DC_ASSOC_KERNEL(kind) DC_PP_CAT(DC_PP_CAT(DC_PP_CAT(dc_assock_, DC_ASSOC_NAME), DC_PP_CAT(_, DC_SFX)), kind)

#define DC_BFN_PASS _primal
#include "bfn_dsl_primal.h"
#include DC_BFN_FILE
#include "assoc_kernels.h"

void DC_ASSOC_KERNEL(_scan)(const dc_assoc_scan_launch *launch, int64_t begin, int64_t end);
void DC_ASSOC_KERNEL(_scan)(const dc_assoc_scan_launch *launch, int64_t begin, int64_t end)
{
    for (int64_t piece = begin; piece < end;) {
        if (end - piece >= DC_ASSOC_GROUP && dc_assoc_scan_group_fits_primal(launch, piece)) {
            dc_assoc_scan_group_primal(launch, piece);
            piece += DC_ASSOC_GROUP;
        } else {
            dc_assoc_scan_piece_primal(launch, piece, 0, launch->inner);
            ++piece;
        }
    }
}

#include "bfn_dsl_end.h"
#undef DC_BFN_PASS

#define DC_BFN_DUAL DC_PP_CAT(dc_assoc_dual_, DC_SFX)
#define DC_DUAL_T DC_BFN_DUAL
#define DC_DUAL_N (2 * dc_assoc_k_primal)
#include "../dual/dual_impl.h"

#define DC_BFN_PASS _dual
#define DC_ASSOC_PRIMAL_BODY dc_assoc_body_primal
#include "bfn_dsl_dual.h"
#include DC_BFN_FILE
#include "assoc_kernels.h"

void DC_ASSOC_KERNEL(_vjp)(const dc_assoc_vjp_launch *launch, int64_t begin, int64_t end);
void DC_ASSOC_KERNEL(_vjp)(const dc_assoc_vjp_launch *launch, int64_t begin, int64_t end)
{
    dc_assoc_vjp_range_dual(launch, begin, end);
}

void DC_ASSOC_KERNEL(_scan_adjoint)(const dc_assoc_scan_adjoint_launch *launch, int64_t begin, int64_t end);
void DC_ASSOC_KERNEL(_scan_adjoint)(const dc_assoc_scan_adjoint_launch *launch, int64_t begin, int64_t end)
{
    const int grouped = launch->phase == DC_ASSOC_ADJ_MAPS || launch->phase == DC_ASSOC_ADJ_PIECES;
    for (int64_t item = begin; item < end;) {
        if (grouped && end - item >= dc_assoc_red_group_dual && dc_assoc_adjoint_group_fits_dual(launch, item)) {
            dc_assoc_adjoint_group_dual(launch, item);
            item += dc_assoc_red_group_dual;
        } else {
            dc_assoc_scan_adjoint_item_dual(launch, item++);
        }
    }
#if defined(DC_TILES8)
    if (launch->streaming)
        dc_tile8_stream_fence();
#endif
}

void DC_ASSOC_KERNEL(_reduce_adjoint)(const dc_assoc_reduce_adjoint_launch *launch, int64_t begin, int64_t end);
void DC_ASSOC_KERNEL(_reduce_adjoint)(const dc_assoc_reduce_adjoint_launch *launch, int64_t begin, int64_t end)
{
    dc_real own[DC_ASSOC_MAX_CHUNK * DC_ASSOC_RED_BUF];
    const int64_t piece = launch->len < launch->chunk ? launch->len : launch->chunk;
    for (int64_t item = begin; item < end;) {
        if (launch->phase == DC_ASSOC_RED_CARRIES) {
            dc_assoc_reduce_carries_dual(launch, item++);
        } else if (!launch->scratch && end - item >= dc_assoc_red_group_dual &&
                   dc_assoc_reduce_group_fits_dual(launch, item)) {
            dc_assoc_reduce_group_dual(launch, item, own);
            item += dc_assoc_red_group_dual;
        } else {
            dc_assoc_reduce_piece_dual(
                launch, item, launch->scratch ? (dc_real *)launch->scratch + item * piece * dc_assoc_k_dual : own);
            ++item;
        }
    }
#if defined(DC_TILES8)
    if (launch->streaming)
        dc_tile8_stream_fence();
#endif
}

#if defined(DC_ASSOC_DESCRIPTOR)

#define DC_ASSOC_KERNEL_T(t, kind) DC_PP_CAT(DC_PP_CAT(DC_PP_CAT(dc_assock_, DC_ASSOC_NAME), t), kind)
#define DC_ASSOC_DECLARE_KERNELS(t)                                                                \
    void DC_ASSOC_KERNEL_T(t, _scan)(const dc_assoc_scan_launch *, int64_t, int64_t);              \
    void DC_ASSOC_KERNEL_T(t, _vjp)(const dc_assoc_vjp_launch *, int64_t, int64_t);                \
    void DC_ASSOC_KERNEL_T(t, _scan_adjoint)(const dc_assoc_scan_adjoint_launch *, int64_t, int64_t);    \
    void DC_ASSOC_KERNEL_T(t, _reduce_adjoint)(const dc_assoc_reduce_adjoint_launch *, int64_t, int64_t);
#define DC_ASSOC_KERNEL_TABLE(t)                                                                   \
    {DC_ASSOC_KERNEL_T(t, _scan), DC_ASSOC_KERNEL_T(t, _vjp), DC_ASSOC_KERNEL_T(t, _scan_adjoint),       \
     DC_ASSOC_KERNEL_T(t, _reduce_adjoint)}

DC_ASSOC_DECLARE_KERNELS(_f32)
DC_ASSOC_DECLARE_KERNELS(_f64)

#if defined(DC_ASSOC_WITH_CUDA)
extern const dc_assoc_cuda_kernels DC_PP_CAT(dc_assoc_cuda_, DC_ASSOC_NAME)[2];
#define DC_ASSOC_CUDA_TABLE DC_PP_CAT(dc_assoc_cuda_, DC_ASSOC_NAME)
#else
#define DC_ASSOC_CUDA_TABLE 0
#endif

extern const dc_assoc DC_PP_CAT(dc_assoc_, DC_ASSOC_NAME);
const dc_assoc DC_PP_CAT(dc_assoc_, DC_ASSOC_NAME) = {
    DC_ASSOC_ABI_VERSION,
    DC_PP_STR(DC_ASSOC_NAME),
    dc_assoc_k_dual,
    dc_assoc_field_names_dual,
    dc_assoc_neutral_values_dual,
    {DC_ASSOC_KERNEL_TABLE(_f32), DC_ASSOC_KERNEL_TABLE(_f64)},
    DC_ASSOC_CUDA_TABLE,
};

#endif /* DC_ASSOC_DESCRIPTOR */
