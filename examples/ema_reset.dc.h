/* An exponential moving average with resets, as an associative operator.
 * Step t is the affine map x -> a x + b with a reset flag r: where r > 0.5
 * the history before t is dropped. Combining left then right applies the
 * right's map after the left's, unless the right resets: then only the
 * right's map (and its flag) remains. The scan of (a_t, b_t, r_t) from the
 * neutral element (the identity, no reset) holds in its field b the state
 * x_t = a_t x_{t-1} + b_t started from 0 at t = 0 and at every reset. */
DC_ASSOC(ema_reset, DC_STATE(a, b, r), DC_NEUTRAL(1, 0, 0))
{
    if (dc_val(r_r) > 0.5)
        DC_RETURN(r_a, r_b, r_r);
    DC_RETURN(dc_mul(r_a, l_a), dc_add(dc_mul(r_a, l_b), r_b), l_r);
}
