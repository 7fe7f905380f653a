/* dist_gloo_stub — dist_gloo_create for a build without gloo (libgloo-dev
 * absent: the Makefile then skips dist_gloo.cc and leaves SGLC_HAVE_GLOO
 * unset here). */
#include <stdio.h>

#include "dist/dist.h"

#ifndef SGLC_HAVE_GLOO
int dist_gloo_available(void) { return 0; }

dist_group *dist_gloo_create(const dist_gloo_opts *o, char *err, size_t errlen)
{
    (void)o;
    snprintf(err, errlen, "this sglc was built without gloo (install libgloo-dev and rebuild), so it cannot "
             "join nodes through --dist-init-addr; run the nodes under mpirun instead");
    return NULL;
}
#else
typedef int dist_gloo_stub_unused; /* the real one is dist_gloo.cc */
#endif
