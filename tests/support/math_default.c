#include <math.h>

#include "dual/scalar_math.h"
#include "support/math_bitwise.h"

#define DC_TEST_SELECT_FN dc_test_default_f32
#include "support/math_select_cases.h"

const char *dc_test_bitwise_name(bitwise_fn fn)
{
    static const char *const names[BW_COUNT] = {
        "exp",       "exp_nonpos(-|x|)",
        "log",       "expm1",
        "log1p",     "tanh",
        "tanh'",     "erf",
        "sin",       "cos",
        "sigmoid",   "sigmoid'",
        "softplus",  "relu",
        "min(x, 1)", "hard_sigmoid(x, 2.5)",
        "abs'",      "adj_mul(x, inf)",
    };
    return fn < BW_COUNT ? names[fn] : "?";
}
