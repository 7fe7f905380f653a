/* test_mamba_state — the recurrent-state slot pool of hybrid Mamba2 models
 * (kv/mamba_state.h): every slot handed out once, refusals of bad frees,
 * LIFO reuse, and SGLang's sizing rule (explicit count, max running
 * requests, the memory ratio split). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kv/mamba_state.h"
#include "util/log.h"

static void test_pool(void **state)
{
    (void)state;
    assert_null(mamba_state_pool_create(0));
    mamba_state_pool *p = mamba_state_pool_create(3);
    assert_non_null(p);
    assert_int_equal(mamba_state_n_total(p), 3);
    int seen[3] = {0};
    for (int i = 0; i < 3; i++) {
        int32_t id = mamba_state_alloc(p);
        assert_true(id >= 0 && id < 3);
        assert_int_equal(seen[id], 0);
        seen[id] = 1;
    }
    assert_int_equal(mamba_state_alloc(p), -1); /* all taken */
    assert_int_equal(mamba_state_n_free(p), 0);
    assert_int_equal(mamba_state_free(p, 1), 0);
    assert_int_equal(mamba_state_free(p, 1), -1); /* double free refused */
    assert_int_equal(mamba_state_free(p, 3), -1); /* out of range */
    assert_int_equal(mamba_state_free(p, -1), -1);
    assert_int_equal(mamba_state_n_free(p), 1);
    assert_int_equal(mamba_state_alloc(p), 1); /* the freed slot comes back */
    mamba_state_pool_destroy(p);
}

static void test_count(void **state)
{
    (void)state;
    double left;
    /* explicit wins, the budget loses what the states take */
    assert_int_equal(mamba_state_count(5, 100, 1000.0, 0.9, 10, &left), 5);
    assert_true(left == 950.0);
    /* then max running requests */
    assert_int_equal(mamba_state_count(0, 7, 1000.0, 0.9, 10, &left), 7);
    assert_true(left == 930.0);
    /* the ratio: states / KV = 0.9 -> states get 0.9 / 1.9 of 1900 = 900 bytes */
    assert_int_equal(mamba_state_count(0, 0, 1900.0, 0.9, 100, &left), 9);
    assert_true(left == 1000.0);
    assert_int_equal(mamba_state_count(0, 0, 1900.0, 0.9, 1000, &left), 0); /* none fits */
    assert_int_equal(mamba_state_count(0, 0, 100.0, 0.9, 0, &left), 0);
    assert_int_equal(mamba_state_count(50, 0, 100.0, 0.9, 10, &left), 50);
    assert_true(left == 0.0); /* clamped */
}

int main(void)
{
    log_set_level(LOG_ERROR + 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
