/* The composition of affine maps x -> a x + b, left then right: the scan of
 * (a_t, b_t) gives the linear recurrence x_t = a_t x_{t-1} + b_t from 0 in
 * its field b. Associative, not commutative. */
DC_ASSOC(linrec, DC_STATE(a, b), DC_NEUTRAL(1, 0))
{
    DC_RETURN(dc_mul(r_a, l_a), dc_add(dc_mul(r_a, l_b), r_b));
}
