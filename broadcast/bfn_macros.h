/* The macros a broadcast function is written with.
 *
 *   DC_BFN(name, DC_OUTPUTS(out, ...), DC_CTRL(mask), DC_WRT(x), ...)
 *   {
 *       if (mask == 1.0f)
 *           DC_RETURN(dc_tanh(x));
 *       DC_RETURN(x);
 *   }
 *
 * DC_WRT marks a differentiable input (a dc_var in the body, which carries
 * partials in the dual instantiation); DC_CTRL a control input (a dc_real,
 * plain and never differentiated: masks, indices, boundary flags). Branch on
 * control inputs directly and on differentiable ones through dc_val(x).
 * DC_RETURN gives one value per name in DC_OUTPUTS and leaves the body.
 *
 * The file holding the body has no include guard: the build includes it once
 * per instantiation (primal and dual; float and double; CPU and CUDA) with
 * different definitions of dc_var, dc_real and the dc_ math (see
 * cmake/DualcastBroadcastFn.cmake). Each inclusion is a "pass": DC_BFN_PASS
 * suffixes every name the macros declare so that two passes can share a
 * translation unit. */
#ifndef DC_BROADCAST_BFN_MACROS_H
#define DC_BROADCAST_BFN_MACROS_H

#include "../dual/hd.h"
#include "pp.h"

#define DC_CTRL(name) (DC_CTRL_, name)
#define DC_WRT(name) (DC_WRT_, name)
#define DC_OUTPUTS(...) (__VA_ARGS__)

#if defined(__GNUC__)
#define DC_BFN_UNUSED __attribute__((unused))
#else
#define DC_BFN_UNUSED
#endif

#define DC_BFN_ID(x) DC_PP_CAT(x, DC_BFN_PASS)
#define DC_BFN_UNPAREN(...) __VA_ARGS__

/* An input descriptor is the pair (kind, name). */
#define DC_BFN_KIND(t) DC_BFN_KIND_ t
#define DC_BFN_KIND_(kind, name) kind
#define DC_BFN_NAME_OF(t) DC_BFN_NAME_OF_ t
#define DC_BFN_NAME_OF_(kind, name) name
#define DC_BFN_BY_KIND(what, t) DC_PP_CAT(what, DC_BFN_KIND(t))(DC_BFN_NAME_OF(t))

/* Position of each input among all inputs, and among the differentiable. */
#define DC_BFN_POS(name) DC_BFN_ID(DC_PP_CAT(dc_bfn_pos_, name))
#define DC_BFN_WRT_INDEX(name) DC_BFN_ID(DC_PP_CAT(dc_bfn_wrt_, name))
#define DC_BFN_POS_ENUM(t) DC_BFN_POS(DC_BFN_NAME_OF(t)),
#define DC_BFN_WRT_ENUM(t) DC_BFN_BY_KIND(DC_BFN_WRT_ENUM_, t)
#define DC_BFN_WRT_ENUM_DC_CTRL_(name)
#define DC_BFN_WRT_ENUM_DC_WRT_(name) DC_BFN_WRT_INDEX(name),
#define DC_BFN_IS_WRT(t) DC_BFN_BY_KIND(DC_BFN_IS_WRT_, t)
#define DC_BFN_IS_WRT_DC_CTRL_(name) 0
#define DC_BFN_IS_WRT_DC_WRT_(name) 1
#define DC_BFN_INPUT_NAME(t) DC_PP_STR(DC_BFN_NAME_OF(t))
#define DC_BFN_PARAM(t) DC_BFN_BY_KIND(DC_BFN_PARAM_, t)
#define DC_BFN_PARAM_DC_CTRL_(name) dc_real name
#define DC_BFN_PARAM_DC_WRT_(name) dc_var name
#define DC_BFN_ARG(t) DC_BFN_BY_KIND(DC_BFN_ARG_, t)
#define DC_BFN_ARG_DC_CTRL_(name) dc_x_[DC_BFN_POS(name)]
#define DC_BFN_ARG_DC_WRT_(name) DC_BFN_SEED(dc_x_[DC_BFN_POS(name)], DC_BFN_WRT_INDEX(name))

/* Counts and metadata of the function, as enum constants and arrays:
 *   dc_bfn_nin<pass>, dc_bfn_nwrt<pass>, dc_bfn_nout<pass>,
 *   dc_bfn_is_wrt<pass>[], dc_bfn_input_names<pass>[], dc_bfn_output_names<pass>[]
 * then the element function dc_bfn_body<pass>(const dc_real *x, dc_var *out)
 * that seeds the differentiable inputs and runs the user's body.
 * The first enum fails to compile when the name differs from the one the
 * build registered (DC_BFN_NAME): "dc_bfn_named_<registered> undeclared". */
#define DC_BFN(name, outputs, ...)                                                                 \
    enum { DC_BFN_ID(DC_PP_CAT(dc_bfn_named_, name)) = 1 };                                        \
    enum { DC_BFN_ID(dc_bfn_name_matches) = DC_BFN_ID(DC_PP_CAT(dc_bfn_named_, DC_BFN_NAME)) };    \
    enum { DC_PP_FOR_EACH(DC_BFN_POS_ENUM, __VA_ARGS__) DC_BFN_ID(dc_bfn_nin) };                   \
    enum { DC_PP_FOR_EACH(DC_BFN_WRT_ENUM, __VA_ARGS__) DC_BFN_ID(dc_bfn_nwrt) };                  \
    enum { DC_BFN_ID(dc_bfn_nout) = DC_PP_NARGS outputs };                                         \
    static const unsigned char DC_BFN_ID(dc_bfn_is_wrt)[] DC_BFN_UNUSED = {                        \
        DC_PP_FOR_EACH_COMMA(DC_BFN_IS_WRT, __VA_ARGS__)};                                         \
    static const char *const DC_BFN_ID(dc_bfn_input_names)[] DC_BFN_UNUSED = {                     \
        DC_PP_FOR_EACH_COMMA(DC_BFN_INPUT_NAME, __VA_ARGS__)};                                     \
    static const char *const DC_BFN_ID(dc_bfn_output_names)[] DC_BFN_UNUSED = {                    \
        DC_PP_FOR_EACH_COMMA(DC_PP_STR, DC_BFN_UNPAREN outputs)};                                  \
    DC_INLINE DC_HD void DC_BFN_ID(dc_bfn_user_body)(DC_PP_FOR_EACH_COMMA(DC_BFN_PARAM, __VA_ARGS__), \
                                                     dc_var *dc_out_);                             \
    DC_INLINE DC_HD void DC_BFN_ID(dc_bfn_body)(const dc_real *dc_x_, dc_var *dc_out_)             \
    {                                                                                              \
        DC_BFN_ID(dc_bfn_user_body)(DC_PP_FOR_EACH_COMMA(DC_BFN_ARG, __VA_ARGS__), dc_out_);       \
    }                                                                                              \
    DC_INLINE DC_HD void DC_BFN_ID(dc_bfn_user_body)(DC_PP_FOR_EACH_COMMA(DC_BFN_PARAM, __VA_ARGS__), \
                                                     dc_var *dc_out_)

/* Set the outputs (one value per DC_OUTPUTS name; plain numbers are taken as
 * constants) and leave the body. Each output is assigned directly, with no
 * aggregate in between, so that the compiler keeps every value in registers
 * and can if-convert a body whose branches return. */
#define DC_BFN_SET_OUTPUT(index, value) dc_out_[index] = dc_const(value);
#define DC_RETURN(...)                                                                             \
    do {                                                                                           \
        DC_STATIC_ASSERT(DC_PP_NARGS(__VA_ARGS__) == DC_BFN_ID(dc_bfn_nout),                       \
                         "DC_RETURN must give one value per name in DC_OUTPUTS");                  \
        DC_PP_FOR_EACH_INDEX(DC_BFN_SET_OUTPUT, __VA_ARGS__)                                       \
        return;                                                                                    \
    } while (0)

#endif /* DC_BROADCAST_BFN_MACROS_H */
