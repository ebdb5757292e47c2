/* The maximum and how many elements reach it (each element's count is its
 * field c, 1 for a plain count): a branch on the values. */
DC_ASSOC(maxcount, DC_STATE(m, c), DC_NEUTRAL(-INFINITY, 0))
{
    if (dc_val(l_m) > dc_val(r_m))
        DC_RETURN(l_m, l_c);
    if (dc_val(r_m) > dc_val(l_m))
        DC_RETURN(r_m, r_c);
    DC_RETURN(l_m, dc_add(l_c, r_c));
}
