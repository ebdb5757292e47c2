/* The macros an associative operator is written with.
 *
 *   DC_ASSOC(linrec, DC_STATE(a, b), DC_NEUTRAL(1, 0))
 *   {   // (l then r): x -> r_a (l_a x + l_b) + r_b
 *       DC_RETURN(dc_mul(r_a, l_a), dc_add(dc_mul(r_a, l_b), r_b));
 *   }
 *
 * A state is a tuple of k fields (DC_STATE, 1 <= k <= DC_ASSOC_MAX_STATE).
 * The body combines the left operand, fields l_<field>, with the right one,
 * fields r_<field>, all dc_var (differentiable), and gives the k fields of
 * the result with DC_RETURN, in DC_STATE's order. DC_NEUTRAL gives the
 * neutral element, one number per field (plain numbers, or INFINITY and
 * the like). The body uses the operators of the broadcast-function language
 * (bfn_dsl_ops.h: dc_add, dc_mul, dc_exp, ...) and may branch on values
 * through dc_val(x).
 *
 * As a broadcast function's body, the file has no include guard and is
 * included once per pass (primal and dual; float and double; CPU and CUDA).
 * Each pass defines, suffixed by DC_BFN_PASS:
 *   dc_assoc_k<pass>                  the number of fields (an enum)
 *   dc_assoc_field_names<pass>[]      their names
 *   dc_assoc_neutral_values<pass>[]   the neutral element, as doubles
 *   dc_assoc_neutral<pass>(f)         field f of it, as dc_real
 *   dc_assoc_body<pass>(l, r, out)    out = l (+) r, arrays of k dc_var
 * and dc_bfn_nout<pass> = k, so that DC_RETURN (bfn_macros.h) checks the
 * count of the values it is given. */
#ifndef DC_BROADCAST_ASSOC_MACROS_H
#define DC_BROADCAST_ASSOC_MACROS_H

#include "bfn_macros.h"

#define DC_STATE(...) (__VA_ARGS__)
#define DC_NEUTRAL(...) (__VA_ARGS__)

#define DC_ASSOC_POS(field) DC_BFN_ID(DC_PP_CAT(dc_assoc_pos_, field))
#define DC_ASSOC_POS_ENUM(field) DC_ASSOC_POS(field),
#define DC_ASSOC_LPARAM(field) dc_var DC_PP_CAT(l_, field)
#define DC_ASSOC_RPARAM(field) dc_var DC_PP_CAT(r_, field)
#define DC_ASSOC_LARG(field) dc_l_[DC_ASSOC_POS(field)]
#define DC_ASSOC_RARG(field) dc_r_[DC_ASSOC_POS(field)]
#define DC_ASSOC_AS_REAL(v) (dc_real)(v)
#define DC_ASSOC_AS_DOUBLE(v) (double)(v)

/* The first enum fails to compile when the name differs from the one the
 * build registered (DC_ASSOC_NAME): "dc_assoc_named_<registered> undeclared". */
#define DC_ASSOC(name, state, neutral)                                                             \
    enum { DC_BFN_ID(DC_PP_CAT(dc_assoc_named_, name)) = 1 };                                      \
    enum { DC_BFN_ID(dc_assoc_name_matches) = DC_BFN_ID(DC_PP_CAT(dc_assoc_named_, DC_ASSOC_NAME)) }; \
    enum { DC_PP_FOR_EACH(DC_ASSOC_POS_ENUM, DC_BFN_UNPAREN state) DC_BFN_ID(dc_assoc_k) };        \
    enum { DC_BFN_ID(dc_bfn_nout) = DC_BFN_ID(dc_assoc_k) };                                       \
    DC_STATIC_ASSERT(DC_PP_NARGS neutral == DC_BFN_ID(dc_assoc_k),                                 \
                     "DC_NEUTRAL must give one value per field of DC_STATE");                      \
    DC_STATIC_ASSERT(DC_BFN_ID(dc_assoc_k) <= DC_ASSOC_MAX_STATE, "too many fields in DC_STATE");  \
    static const char *const DC_BFN_ID(dc_assoc_field_names)[] DC_BFN_UNUSED = {                   \
        DC_PP_FOR_EACH_COMMA(DC_PP_STR, DC_BFN_UNPAREN state)};                                    \
    static const double DC_BFN_ID(dc_assoc_neutral_values)[] DC_BFN_UNUSED = {                     \
        DC_PP_FOR_EACH_COMMA(DC_ASSOC_AS_DOUBLE, DC_BFN_UNPAREN neutral)};                         \
    DC_INLINE DC_HD dc_real DC_BFN_ID(dc_assoc_neutral)(int f)                                     \
    {                                                                                              \
        const dc_real v[] = {DC_PP_FOR_EACH_COMMA(DC_ASSOC_AS_REAL, DC_BFN_UNPAREN neutral)};      \
        return v[f];                                                                               \
    }                                                                                              \
    DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_user_body)(                                            \
        DC_PP_FOR_EACH_COMMA(DC_ASSOC_LPARAM, DC_BFN_UNPAREN state),                               \
        DC_PP_FOR_EACH_COMMA(DC_ASSOC_RPARAM, DC_BFN_UNPAREN state), dc_var *dc_out_);             \
    DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_body)(const dc_var *dc_l_, const dc_var *dc_r_, dc_var *dc_out_) \
    {                                                                                              \
        DC_BFN_ID(dc_assoc_user_body)(DC_PP_FOR_EACH_COMMA(DC_ASSOC_LARG, DC_BFN_UNPAREN state),   \
                                      DC_PP_FOR_EACH_COMMA(DC_ASSOC_RARG, DC_BFN_UNPAREN state), dc_out_); \
    }                                                                                              \
    DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_user_body)(                                            \
        DC_PP_FOR_EACH_COMMA(DC_ASSOC_LPARAM, DC_BFN_UNPAREN state),                               \
        DC_PP_FOR_EACH_COMMA(DC_ASSOC_RPARAM, DC_BFN_UNPAREN state), dc_var *dc_out_)

#endif /* DC_BROADCAST_ASSOC_MACROS_H */
