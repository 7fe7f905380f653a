/* test_util — dtype conversions, the thread pool, fileio, errmsg. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/dtype.h"
#include "util/errmsg.h"
#include "util/fileio.h"
#include "util/strbuf.h"
#include "util/threadpool.h"

static void test_bf16_roundtrip(void **state)
{
    (void)state;
    assert_int_equal(f32_to_bf16(1.0f), 0x3f80);
    assert_true(bf16_to_f32(0x3f80) == 1.0f);
    /* round to nearest even: 1 + 2^-8 is a tie between 1 and 1+2^-7 -> 1 */
    assert_int_equal(f32_to_bf16(1.00390625f), 0x3f80);
    assert_int_equal(f32_to_bf16(1.01171875f), 0x3f82);
    assert_true(isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

static void test_f16_roundtrip(void **state)
{
    (void)state;
    for (int h = 0; h < 0x10000; h++) {
        uint16_t v = (uint16_t)h;
        if ((v & 0x7c00) == 0x7c00 && (v & 0x3ff)) continue; /* NaN payloads */
        float f = f16_to_f32(v);
        assert_int_equal(f32_to_f16(f), v);
    }
    assert_int_equal(f32_to_f16(65520.0f), 0x7c00);
    assert_int_equal(f32_to_f16(65504.0f), 0x7bff);
    assert_true(f16_to_f32(0x0001) == 5.9604644775390625e-8f);
}

typedef struct {
    atomic_int hits[8];
    atomic_int total;
    tpool *pool;
    atomic_int phase_ok;
} pool_ctx;

static void pool_task(void *vctx, int ith, int nth)
{
    pool_ctx *c = vctx;
    atomic_fetch_add(&c->hits[ith], 1);
    atomic_fetch_add(&c->total, 1);
    tpool_barrier(c->pool);
    /* after the barrier every thread of this run has counted */
    if (atomic_load(&c->total) % nth == 0) atomic_fetch_add(&c->phase_ok, 1);
}

static void test_threadpool(void **state)
{
    (void)state;
    for (int n = 1; n <= 4; n++) {
        pool_ctx c = {0};
        c.pool = tpool_create(n);
        assert_non_null(c.pool);
        assert_int_equal(tpool_size(c.pool), n);
        for (int r = 0; r < 1000; r++) tpool_run(c.pool, pool_task, &c);
        for (int i = 0; i < n; i++) assert_int_equal(atomic_load(&c.hits[i]), 1000);
        assert_int_equal(atomic_load(&c.phase_ok), 1000 * n);
        tpool_destroy(c.pool);
    }
}

static void test_fileio(void **state)
{
    (void)state;
    char path[] = "/tmp/sglc_fileio_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    /* 3 MiB + 5: more than the first guess of any growth step */
    size_t big = (3u << 20) + 5;
    char *data = malloc(big);
    assert_non_null(data);
    for (size_t i = 0; i < big; i++) data[i] = (char)('a' + i % 26);
    assert_int_equal(write(fd, data, big), (ssize_t)big);
    close(fd);
    size_t len = 0;
    char *b = fileio_read(path, 0, &len);
    assert_non_null(b);
    assert_int_equal(len, big);
    assert_memory_equal(b, data, big);
    assert_int_equal(b[len], 0);
    free(b);
    b = fileio_read(path, big, &len); /* exactly the cap: accepted */
    assert_non_null(b);
    free(b);
    errno = 0;
    assert_null(fileio_read(path, big - 1, &len)); /* one byte over */
    assert_int_equal(errno, EFBIG);
    assert_null(fileio_read("/tmp", 0, &len));
    assert_int_equal(errno, EISDIR);
    assert_null(fileio_read("/nonexistent/sglc", 0, NULL));
    assert_int_equal(errno, ENOENT);
    FILE *f = fopen(path, "wb"); /* empty file */
    fclose(f);
    b = fileio_read(path, 10, &len);
    assert_non_null(b);
    assert_int_equal(len, 0);
    free(b);
    unlink(path);
    free(data);
    char e[8];
    errmsg_set(e, sizeof e, "%s-%d", "abcdef", 42);
    assert_string_equal(e, "abcdef-");
    errmsg_set(NULL, 0, "%d", 1); /* no buffer: nothing written, no crash */
}

static void test_strbuf(void **state)
{
    (void)state;
    strbuf b = {0};
    char *e = strbuf_take(&b);
    assert_string_equal(e, "");
    free(e);
    strbuf_puts(&b, "ab");
    strbuf_put(&b, "cdef", 2);
    for (int i = 0; i < 100; i++) strbuf_printf(&b, "%03d,", i); /* grows past the first 256 */
    char big[600];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    strbuf_printf(&b, "%s", big); /* longer than the printf stack buffer */
    assert_int_equal(b.len, 4 + 400 + 599);
    char *s = strbuf_take(&b);
    assert_memory_equal(s, "abcd000,001,", 12);
    assert_int_equal(strlen(s), 4 + 400 + 599);
    assert_int_equal(s[4 + 400], 'x');
    assert_null(b.p);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_roundtrip),
        cmocka_unit_test(test_f16_roundtrip),
        cmocka_unit_test(test_threadpool),
        cmocka_unit_test(test_fileio),
        cmocka_unit_test(test_strbuf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
