/* An exponential moving average with resets: element t is the map
 * x -> a x + b with a reset flag r (r > 0.5: the history before t is
 * dropped). Left then right: the right's map after the left's, unless the
 * right resets, which then keeps only its own map and its flag. The flag
 * takes no gradient (its partials are those of the branch taken). */
DC_ASSOC(ema_reset, DC_STATE(a, b, r), DC_NEUTRAL(1, 0, 0))
{
    if (dc_val(r_r) > 0.5)
        DC_RETURN(r_a, r_b, r_r);
    DC_RETURN(dc_mul(r_a, l_a), dc_add(dc_mul(r_a, l_b), r_b), l_r);
}
