/* The arity sweep's broadcast functions (made by dc_add_prod_sign_fns in
 * bench/kernels/prod_sign.cmake): their declarations, and PROD_SIGN_FNS, an
 * initializer for a table of them by arity (entry 0 empty), for the
 * programs that link them. */
#ifndef DC_PROD_SIGN_FNS_H
#define DC_PROD_SIGN_FNS_H

#include <dualcast.h>

enum { PROD_SIGN_FN_MAX_ARITY = 10 };

DC_BFN_DECLARE(prod_sign_1);
DC_BFN_DECLARE(prod_sign_2);
DC_BFN_DECLARE(prod_sign_3);
DC_BFN_DECLARE(prod_sign_4);
DC_BFN_DECLARE(prod_sign_5);
DC_BFN_DECLARE(prod_sign_6);
DC_BFN_DECLARE(prod_sign_7);
DC_BFN_DECLARE(prod_sign_8);
DC_BFN_DECLARE(prod_sign_9);
DC_BFN_DECLARE(prod_sign_10);

#define PROD_SIGN_FNS                                                                              \
    {                                                                                              \
        NULL, DC_BFN_REF(prod_sign_1), DC_BFN_REF(prod_sign_2), DC_BFN_REF(prod_sign_3),           \
            DC_BFN_REF(prod_sign_4), DC_BFN_REF(prod_sign_5), DC_BFN_REF(prod_sign_6),             \
            DC_BFN_REF(prod_sign_7), DC_BFN_REF(prod_sign_8), DC_BFN_REF(prod_sign_9),             \
            DC_BFN_REF(prod_sign_10)                                                               \
    }

#endif /* DC_PROD_SIGN_FNS_H */
