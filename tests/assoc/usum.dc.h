/* The sum, as a user operator: one field. */
DC_ASSOC(usum, DC_STATE(v), DC_NEUTRAL(0))
{
    DC_RETURN(dc_add(l_v, r_v));
}
