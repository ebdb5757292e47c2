/* The product of 2x2 matrices [[a, b], [c, d]], left times right: four
 * fields, not commutative. */
DC_ASSOC(mat2, DC_STATE(a, b, c, d), DC_NEUTRAL(1, 0, 0, 1))
{
    DC_RETURN(dc_add(dc_mul(l_a, r_a), dc_mul(l_b, r_c)), dc_add(dc_mul(l_a, r_b), dc_mul(l_b, r_d)),
              dc_add(dc_mul(l_c, r_a), dc_mul(l_d, r_c)), dc_add(dc_mul(l_c, r_b), dc_mul(l_d, r_d)));
}
