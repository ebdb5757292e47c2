/* The BLAS that CPU matrix products run on, and whether it runs well here. */
#ifndef DUALCAST_BLAS_H
#define DUALCAST_BLAS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dc_blas_info {
    /* "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64" (its
     * own description), or "a BLAS that does not describe itself" */
    char library[160];
    /* The kernel set OpenBLAS chose for this CPU ("SkylakeX", "Haswell",
     * "Zen", "Prescott", ...), or "" when the BLAS does not say */
    char core[32];
    /* What the CPU offers: "AVX-512", "AVX2" or "" (neither, or not x86) */
    char cpu_vector[16];
    /* "" when the kernels suit the CPU; else what is wrong and the remedy,
     * for example a generic core on a CPU with AVX2 or AVX-512 (OpenBLAS's
     * run-time detection can fail on virtual machines and on CPUs newer
     * than the OpenBLAS release), fixed by setting OPENBLAS_CORETYPE */
    char warning[320];
} dc_blas_info;

/* Describes the BLAS this process runs dualcast's CPU matrix products on.
 * Reads the library's self-description (OpenBLAS's openblas_get_config and
 * openblas_get_corename, where present) and the CPU's vector extensions;
 * changes nothing. `info` must not be NULL. */
void dc_blas_info_get(dc_blas_info *info);

#ifdef __cplusplus
}
#endif

#endif /* DUALCAST_BLAS_H */
