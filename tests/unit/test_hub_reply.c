/* test_hub_reply — the decisions src/hub takes on a server's replies
 * (src/hub/hub_reply.h), without a server: the file plan over siblings
 * and a safetensors index, the HEAD verdict, the HTTP status mapping, and
 * the Range-resume protocol (first body bytes, what follows an attempt).
 * test_hub.c covers the file filter, model info and header lines. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "hub/hub.h"

static json_t *siblings(const char *const *names, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_pack("{s:s}", "rfilename", names[i]));
    return a;
}

static void test_plan(void **state)
{
    (void)state;
    const char *names[] = {"other.safetensors.index.json", "model.safetensors.index.json",
                           "z.safetensors.index.json",     "model-00001-of-00002.safetensors",
                           "model-00002-of-00002.safetensors", "consolidated.safetensors",
                           "config.json",                  "sub/x.safetensors.index.json"};
    json_t *sib = siblings(names, sizeof names / sizeof names[0]);
    /* model.safetensors.index.json wins over the others, whatever the order */
    assert_string_equal(hub_pick_index(sib, false), "model.safetensors.index.json");
    const char *two[] = {"a.safetensors.index.json", "b.safetensors.index.json"};
    json_t *s2 = siblings(two, 2);
    assert_string_equal(hub_pick_index(s2, false), "a.safetensors.index.json"); /* else the first */
    json_decref(s2);
    json_t *none = json_array();
    assert_null(hub_pick_index(none, false));
    json_decref(none);
    assert_non_null(hub_pick_index(sib, true)); /* skip_weights still fetches the index */

    const char *idx = "{\"metadata\": {}, \"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\", "
                      "\"b\": \"model-00002-of-00002.safetensors\", \"c\": 3}}";
    json_t *shards = hub_parse_index_shards(idx, strlen(idx));
    assert_non_null(shards);
    assert_int_equal(json_object_size(shards), 2);
    assert_true(hub_file_in_pass("config.json", 0, false, shards));
    assert_false(hub_file_in_pass("config.json", 1, false, shards));
    assert_true(hub_file_in_pass("model.safetensors.index.json", 0, false, shards));
    assert_true(hub_file_in_pass("model-00001-of-00002.safetensors", 1, false, shards));
    assert_false(hub_file_in_pass("model-00001-of-00002.safetensors", 0, false, shards));
    assert_false(hub_file_in_pass("consolidated.safetensors", 1, false, shards)); /* not in the index */
    assert_true(hub_file_in_pass("consolidated.safetensors", 1, false, NULL));    /* no index: all */
    assert_false(hub_file_in_pass("model-00001-of-00002.safetensors", 1, true, shards)); /* skip_weights */
    assert_false(hub_file_in_pass("sub/x.safetensors", 1, false, NULL));
    assert_false(hub_file_in_pass(NULL, 0, false, NULL));
    json_decref(shards);
    const char *bad[] = {"", "[]", "{\"weight_map\": []}", "{\"weight_map\": 1}", "{} junk", "{\"a\": 1}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) assert_null(hub_parse_index_shards(bad[i], strlen(bad[i])));
    json_decref(sib);
}

static void feed(hub_head_info *hi, const char *line) { hub_parse_header_line(hi, line, strlen(line)); }

static void test_head_decide(void **state)
{
    (void)state;
    hub_head_info hi;
    char etag[160];
    long long size;
    /* LFS file: the redirect's X-Linked-* win */
    hub_head_info_reset(&hi);
    feed(&hi, "X-Linked-Etag: \"abc123\"\r\n");
    feed(&hi, "X-Linked-Size: 2626168\r\n");
    feed(&hi, "ETag: W/\"deadbeef\"\r\n");
    feed(&hi, "Content-Length: 0\r\n");
    assert_int_equal(hub_head_decide(&hi, 302, false, etag, sizeof etag, &size), HUB_HEAD_USE);
    assert_string_equal(etag, "abc123");
    assert_true(size == 2626168);
    /* plain file: ETag and Content-Length of the 200 */
    hub_head_info_reset(&hi);
    feed(&hi, "ETag: \"0f0f\"\r\n");
    feed(&hi, "Content-Length: 657\r\n");
    assert_int_equal(hub_head_decide(&hi, 200, false, etag, sizeof etag, &size), HUB_HEAD_USE);
    assert_string_equal(etag, "0f0f");
    assert_true(size == 657);
    /* a redirect's own Content-Length is not the file's */
    assert_int_equal(hub_head_decide(&hi, 307, false, etag, sizeof etag, &size), HUB_HEAD_USE);
    assert_true(size == -1);
    /* a negative length is no length */
    feed(&hi, "Content-Length: -5\r\n");
    assert_int_equal(hub_head_decide(&hi, 200, false, etag, sizeof etag, &size), HUB_HEAD_USE);
    assert_true(size == -1);
    /* renamed repo: a redirect without etag is followed once */
    hub_head_info_reset(&hi);
    assert_int_equal(hub_head_decide(&hi, 301, false, etag, sizeof etag, &size), HUB_HEAD_FOLLOW);
    assert_int_equal(hub_head_decide(&hi, 301, true, etag, sizeof etag, &size), HUB_HEAD_NO_ETAG);
    assert_int_equal(hub_head_decide(&hi, 200, false, etag, sizeof etag, &size), HUB_HEAD_NO_ETAG);
    /* etags that would not be safe file names */
    const char *bad[] = {"ETag: \"../x\"\r\n", "ETag: \"a/b\"\r\n", "ETag: \"a b\"\r\n", "ETag: \".\"\r\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hub_head_info_reset(&hi);
        feed(&hi, bad[i]);
        assert_int_equal(hub_head_decide(&hi, 200, false, etag, sizeof etag, &size), HUB_HEAD_NO_ETAG);
    }
    char longtag[200] = "ETag: ";
    memset(longtag + 6, 'a', 129);
    hub_head_info_reset(&hi);
    feed(&hi, longtag);
    assert_int_equal(hub_head_decide(&hi, 200, false, etag, sizeof etag, &size), HUB_HEAD_NO_ETAG);
    /* errors */
    hub_head_info_reset(&hi);
    feed(&hi, "ETag: \"0f0f\"\r\n");
    long errs[] = {401, 403, 404, 416, 500, 0, 100, 204};
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
        assert_int_equal(hub_head_decide(&hi, errs[i], false, etag, sizeof etag, &size), HUB_HEAD_FAIL);
    assert_int_equal(hub_http_status(401), HUB_EAUTH);
    assert_int_equal(hub_http_status(403), HUB_EAUTH);
    assert_int_equal(hub_http_status(404), HUB_ENOTFOUND);
    assert_int_equal(hub_http_status(500), HUB_ENET);
    assert_int_equal(hub_http_status(416), HUB_ENET);
}

static void test_range(void **state)
{
    (void)state;
    assert_int_equal(hub_body_start(200, 0), HUB_BODY_APPEND);
    assert_int_equal(hub_body_start(206, 1000), HUB_BODY_APPEND);
    assert_int_equal(hub_body_start(200, 1000), HUB_BODY_RESTART); /* Range ignored */
    assert_int_equal(hub_body_start(404, 0), HUB_BODY_DISCARD);
    assert_int_equal(hub_body_start(416, 1000), HUB_BODY_DISCARD);

    bool tr;
    long long off = 100;
    assert_int_equal(hub_transfer_next(true, 206, true, &off, 100, 1, 5, &tr), HUB_XFER_DONE);
    assert_false(tr);
    off = 40;
    assert_int_equal(hub_transfer_next(true, 200, true, &off, -1, 1, 5, &tr), HUB_XFER_DONE); /* size unknown */
    /* a short transfer resumes at what arrived, then gives up after the last attempt */
    off = 40;
    assert_int_equal(hub_transfer_next(true, 206, true, &off, 100, 1, 5, &tr), HUB_XFER_RETRY);
    assert_true(off == 40 && !tr);
    assert_int_equal(hub_transfer_next(false, 206, true, &off, 100, 4, 5, &tr), HUB_XFER_RETRY);
    assert_int_equal(hub_transfer_next(false, 206, true, &off, 100, 5, 5, &tr), HUB_XFER_GIVE_UP);
    /* 416 on a resume: start over at 0 now, unless it is the last attempt */
    off = 60;
    assert_int_equal(hub_transfer_next(true, 416, false, &off, 100, 1, 5, &tr), HUB_XFER_RESTART);
    assert_true(off == 0 && tr);
    off = 60;
    assert_int_equal(hub_transfer_next(true, 416, false, &off, 100, 5, 5, &tr), HUB_XFER_FAIL);
    off = 0;
    assert_int_equal(hub_transfer_next(true, 416, false, &off, 100, 1, 5, &tr), HUB_XFER_FAIL);
    /* an empty 200 to a Range request: the partial file is dropped */
    off = 60;
    assert_int_equal(hub_transfer_next(true, 200, false, &off, 100, 1, 5, &tr), HUB_XFER_RETRY);
    assert_true(off == 0 && tr);
    off = 60;
    assert_int_equal(hub_transfer_next(true, 200, false, &off, -1, 1, 5, &tr), HUB_XFER_DONE);
    assert_true(off == 0 && tr);
    /* more than announced */
    off = 120;
    assert_int_equal(hub_transfer_next(true, 206, true, &off, 100, 1, 5, &tr), HUB_XFER_TOO_LONG);
    assert_true(off == 120 && tr);
    /* HTTP errors */
    off = 0;
    assert_int_equal(hub_transfer_next(true, 404, false, &off, 100, 1, 5, &tr), HUB_XFER_FAIL);
    assert_int_equal(hub_transfer_next(false, 404, false, &off, 100, 1, 5, &tr), HUB_XFER_RETRY);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_head_decide),
        cmocka_unit_test(test_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
