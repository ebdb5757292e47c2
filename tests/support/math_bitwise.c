#define DC_SELECT_BITWISE 1
#include <math.h>

#include "dual/scalar_math.h"
#include "support/math_bitwise.h"

#define DC_TEST_SELECT_FN dc_test_bitwise_f32
#include "support/math_select_cases.h"
