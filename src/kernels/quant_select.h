/* quant_select — private to src/kernels: the start-up timing that checks
 * quant_dot.c's AVX-512 VNNI-or-AVX2 table (see quant_select.c). */
#ifndef SGLC_KERNELS_QUANT_SELECT_H
#define SGLC_KERNELS_QUANT_SELECT_H

#include "kernels/kern_types.h"

/* Time t's AVX2 and VNNI plain-layout dots (once per process; cached) and
 * decide each path with kern_bf16_decide's rule, the table's bits as the
 * priors: *gemv (m = 1) and *gemm (m > 1), 1 = VNNI.  0, or -1 when t has
 * no pair of kernels to time (the table stands). */
int quant_avx512_measure(kern_type t, int prior_gemv, int prior_gemm, int *gemv, int *gemm);

typedef struct quant_select_info {
    const char *how;        /* "table checked by measurement", "SGLC_QUANT_AVX512=all", ... */
    int n_checked;          /* types measured */
    int n_overturned;       /* plain-layout table entries the measurement overturned */
    char overturned[512];   /* "q8_0 gemv->vnni (1.21x), ..." */
    double ms;              /* time the measurements took */
} quant_select_info;

/* Bookkeeping for the summary (quant_avx512_select calls these). */
void quant_select_reset(const char *how);
void quant_select_note(kern_type t, int path, int table, int chosen);
const quant_select_info *quant_select_get(void);
/* best AVX2 time / best VNNI time of t's path (0 gemv, 1 gemm); 0 if not measured. */
double quant_select_ratio(kern_type t, int path);

#endif
