/* What a reduction kernel computes (src/ops/reduce_formulas.h). */
#ifndef DC_OPS_REDUCE_KINDS_H
#define DC_OPS_REDUCE_KINDS_H

/* The first four are dc_reduction's values, in its order. */
enum { DC_RK_SUM, DC_RK_PROD, DC_RK_MAX, DC_RK_MIN, DC_RK_LSE };

#endif /* DC_OPS_REDUCE_KINDS_H */
