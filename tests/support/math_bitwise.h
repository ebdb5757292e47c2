/* The float math compiled with DC_SELECT_BITWISE (see dc_select_f32 in
 * dual/math_f32.h), as the broadcast kernels for per-element control use it,
 * so that a test can compare it with the default build bit for bit. */
#ifndef DC_TEST_MATH_BITWISE_H
#define DC_TEST_MATH_BITWISE_H

/* the functions of dual/scalar_math.h that choose between values */
typedef enum bitwise_fn {
    BW_EXP,
    BW_EXP_NONPOS,
    BW_LOG,
    BW_EXPM1,
    BW_LOG1P,
    BW_TANH,
    BW_TANH_DX,
    BW_ERF,
    BW_SIN,
    BW_COS,
    BW_SIGMOID,
    BW_SIGMOID_DX,
    BW_SOFTPLUS,
    BW_RELU,
    BW_MIN_ONE,
    BW_HARD_SIGMOID,
    BW_ABS_DX,
    BW_ADJ_MUL_INF,
    BW_COUNT
} bitwise_fn;

/* fn of x, with the bitwise select */
float dc_test_bitwise_f32(bitwise_fn fn, float x);
/* the same with the default select (a plain conditional) */
float dc_test_default_f32(bitwise_fn fn, float x);
/* a name for messages */
const char *dc_test_bitwise_name(bitwise_fn fn);

#endif
