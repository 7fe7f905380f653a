/* tinystories_fixture — the cmocka group fixture the scheduler-level unit
 * tests share: TinyStories-656K from $SGLC_SHARED (default ../shared)
 * loaded once into g_model by tiny_setup, freed by tiny_teardown, and
 * NEED_MODEL() skipping a test when the model is not there.
 *
 * Include after <cmocka.h> (and its <stdarg.h>/<setjmp.h>/<stddef.h>) in
 * one test file; the definitions are static, one copy per test binary. */
#ifndef SGLC_TESTS_TINYSTORIES_FIXTURE_H
#define SGLC_TESTS_TINYSTORIES_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "model/model.h"
#include "util/log.h"

static model *g_model;

static int tiny_setup(void **state)
{
    (void)state;
    kernels_init(NULL);
    log_set_level(getenv("SGLC_TEST_DEBUG") ? LOG_DEBUG : LOG_WARNING);
    const char *sh = getenv("SGLC_SHARED");
    char dir[512], err[1024];
    snprintf(dir, sizeof dir, "%s/models/TinyStories-656K", sh && *sh ? sh : "../shared");
    if (access(dir, R_OK) != 0) return 0;
    model_load_opts o = {.model_path = dir, .dtype = -1};
    g_model = model_load(&o, err, sizeof err);
    if (!g_model) fprintf(stderr, "load failed: %s\n", err);
    return 0;
}

static int tiny_teardown(void **state)
{
    (void)state;
    model_free(g_model);
    return 0;
}

#define NEED_MODEL()                                                                   \
    do {                                                                               \
        if (!g_model) {                                                                \
            print_message("TinyStories-656K not found under $SGLC_SHARED: skipped\n"); \
            skip();                                                                    \
        }                                                                              \
    } while (0)

#endif
