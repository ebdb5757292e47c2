/* Preprocessor helpers for the broadcast-function macros: argument counting
 * and mapping a macro over up to 32 arguments. */
#ifndef DC_BROADCAST_PP_H
#define DC_BROADCAST_PP_H

#define DC_PP_CAT(a, b) DC_PP_CAT_(a, b)
#define DC_PP_CAT_(a, b) a##b
#define DC_PP_STR(x) DC_PP_STR_(x)
#define DC_PP_STR_(x) #x
#define DC_PP_EXPAND(x) x

/* Number of arguments, 1 to 32. */
#define DC_PP_NARGS(...) DC_PP_EXPAND(DC_PP_NARGS_(__VA_ARGS__, 32,31,30,29,28,27,26,25,24,23,22,21,20,19,18,17,16,15,14,13,12,11,10,9,8,7,6,5,4,3,2,1, 0))
#define DC_PP_NARGS_(_1,_2,_3,_4,_5,_6,_7,_8,_9,_10,_11,_12,_13,_14,_15,_16,_17,_18,_19,_20,_21,_22,_23,_24,_25,_26,_27,_28,_29,_30,_31,_32, N, ...) N

/* m(x) for each argument x, juxtaposed. */
#define DC_PP_FOR_EACH(m, ...) DC_PP_EXPAND(DC_PP_CAT(DC_PP_FE_, DC_PP_NARGS(__VA_ARGS__))(m, __VA_ARGS__))
#define DC_PP_FE_1(m, x) m(x)
#define DC_PP_FE_2(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_1(m, __VA_ARGS__))
#define DC_PP_FE_3(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_2(m, __VA_ARGS__))
#define DC_PP_FE_4(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_3(m, __VA_ARGS__))
#define DC_PP_FE_5(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_4(m, __VA_ARGS__))
#define DC_PP_FE_6(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_5(m, __VA_ARGS__))
#define DC_PP_FE_7(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_6(m, __VA_ARGS__))
#define DC_PP_FE_8(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_7(m, __VA_ARGS__))
#define DC_PP_FE_9(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_8(m, __VA_ARGS__))
#define DC_PP_FE_10(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_9(m, __VA_ARGS__))
#define DC_PP_FE_11(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_10(m, __VA_ARGS__))
#define DC_PP_FE_12(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_11(m, __VA_ARGS__))
#define DC_PP_FE_13(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_12(m, __VA_ARGS__))
#define DC_PP_FE_14(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_13(m, __VA_ARGS__))
#define DC_PP_FE_15(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_14(m, __VA_ARGS__))
#define DC_PP_FE_16(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_15(m, __VA_ARGS__))
#define DC_PP_FE_17(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_16(m, __VA_ARGS__))
#define DC_PP_FE_18(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_17(m, __VA_ARGS__))
#define DC_PP_FE_19(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_18(m, __VA_ARGS__))
#define DC_PP_FE_20(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_19(m, __VA_ARGS__))
#define DC_PP_FE_21(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_20(m, __VA_ARGS__))
#define DC_PP_FE_22(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_21(m, __VA_ARGS__))
#define DC_PP_FE_23(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_22(m, __VA_ARGS__))
#define DC_PP_FE_24(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_23(m, __VA_ARGS__))
#define DC_PP_FE_25(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_24(m, __VA_ARGS__))
#define DC_PP_FE_26(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_25(m, __VA_ARGS__))
#define DC_PP_FE_27(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_26(m, __VA_ARGS__))
#define DC_PP_FE_28(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_27(m, __VA_ARGS__))
#define DC_PP_FE_29(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_28(m, __VA_ARGS__))
#define DC_PP_FE_30(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_29(m, __VA_ARGS__))
#define DC_PP_FE_31(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_30(m, __VA_ARGS__))
#define DC_PP_FE_32(m, x, ...) m(x) DC_PP_EXPAND(DC_PP_FE_31(m, __VA_ARGS__))

/* m(x) for each argument x, separated by commas. */
#define DC_PP_FOR_EACH_COMMA(m, ...) DC_PP_EXPAND(DC_PP_CAT(DC_PP_FEC_, DC_PP_NARGS(__VA_ARGS__))(m, __VA_ARGS__))
#define DC_PP_FEC_1(m, x) m(x)
#define DC_PP_FEC_2(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_1(m, __VA_ARGS__))
#define DC_PP_FEC_3(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_2(m, __VA_ARGS__))
#define DC_PP_FEC_4(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_3(m, __VA_ARGS__))
#define DC_PP_FEC_5(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_4(m, __VA_ARGS__))
#define DC_PP_FEC_6(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_5(m, __VA_ARGS__))
#define DC_PP_FEC_7(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_6(m, __VA_ARGS__))
#define DC_PP_FEC_8(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_7(m, __VA_ARGS__))
#define DC_PP_FEC_9(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_8(m, __VA_ARGS__))
#define DC_PP_FEC_10(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_9(m, __VA_ARGS__))
#define DC_PP_FEC_11(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_10(m, __VA_ARGS__))
#define DC_PP_FEC_12(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_11(m, __VA_ARGS__))
#define DC_PP_FEC_13(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_12(m, __VA_ARGS__))
#define DC_PP_FEC_14(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_13(m, __VA_ARGS__))
#define DC_PP_FEC_15(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_14(m, __VA_ARGS__))
#define DC_PP_FEC_16(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_15(m, __VA_ARGS__))
#define DC_PP_FEC_17(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_16(m, __VA_ARGS__))
#define DC_PP_FEC_18(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_17(m, __VA_ARGS__))
#define DC_PP_FEC_19(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_18(m, __VA_ARGS__))
#define DC_PP_FEC_20(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_19(m, __VA_ARGS__))
#define DC_PP_FEC_21(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_20(m, __VA_ARGS__))
#define DC_PP_FEC_22(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_21(m, __VA_ARGS__))
#define DC_PP_FEC_23(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_22(m, __VA_ARGS__))
#define DC_PP_FEC_24(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_23(m, __VA_ARGS__))
#define DC_PP_FEC_25(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_24(m, __VA_ARGS__))
#define DC_PP_FEC_26(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_25(m, __VA_ARGS__))
#define DC_PP_FEC_27(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_26(m, __VA_ARGS__))
#define DC_PP_FEC_28(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_27(m, __VA_ARGS__))
#define DC_PP_FEC_29(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_28(m, __VA_ARGS__))
#define DC_PP_FEC_30(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_29(m, __VA_ARGS__))
#define DC_PP_FEC_31(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_30(m, __VA_ARGS__))
#define DC_PP_FEC_32(m, x, ...) m(x), DC_PP_EXPAND(DC_PP_FEC_31(m, __VA_ARGS__))

#endif /* DC_BROADCAST_PP_H */
