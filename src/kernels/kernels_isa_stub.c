/* Placeholder definitions until kernels_avx2.c / kernels_avx512.c exist:
 * NULL tables make kernels_init() fall back to the scalar reference.
 * (Delete the matching line when an ISA file defines its table.) */
#include "kernels/kernels_impl.h"

const kern_vtable *const kern_vtable_avx2 = NULL;
