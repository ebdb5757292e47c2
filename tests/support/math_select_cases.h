/* The body of dc_test_bitwise_f32 and dc_test_default_f32: included by two
 * translation units that differ only in DC_SELECT_BITWISE. DC_TEST_SELECT_FN
 * names the function. No include guard. */
float DC_TEST_SELECT_FN(bitwise_fn fn, float x)
{
    float d = 0.0f;
    switch (fn) {
    case BW_EXP:
        return dc_exp_f32(x);
    case BW_EXP_NONPOS:
        return dc_exp_nonpos_f32(-fabsf(x));
    case BW_LOG:
        return dc_log_f32(x);
    case BW_EXPM1:
        return dc_expm1_f32(x);
    case BW_LOG1P:
        return dc_log1p_f32(x);
    case BW_TANH:
        return dc_tanh_f32(x);
    case BW_TANH_DX:
        (void)dc_tanh_vd_f32(x, &d);
        return d;
    case BW_ERF:
        return dc_erf_f32(x);
    case BW_SIN:
        return dc_sin_f32(x);
    case BW_COS:
        return dc_cos_f32(x);
    case BW_SIGMOID:
        return dc_sigmoid_f32(x);
    case BW_SIGMOID_DX:
        (void)dc_sigmoid_vd_f32(x, &d);
        return d;
    case BW_SOFTPLUS:
        return dc_softplus_f32(x);
    case BW_RELU:
        return dc_relu_f32(x);
    case BW_MIN_ONE:
        return dc_min_f32(x, 1.0f);
    case BW_HARD_SIGMOID:
        return dc_hard_sigmoid_f32(x, 2.5f);
    case BW_ABS_DX:
        return dc_abs_dx_f32(x);
    case BW_ADJ_MUL_INF:
        return dc_adj_mul_f32(x, INFINITY);
    case BW_COUNT:
        break;
    }
    return NAN;
}
