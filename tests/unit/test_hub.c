/* test_hub — the parts of the hub downloader that need no server: file
 * selection, model-info and header parsing, argument checks, and offline
 * resolution from a hand-made cache.  The HTTP paths are covered by
 * tests/scripts/test_hub_download.sh against a local stand-in hub. */
#include <jansson.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "hub/hub.h"

static void test_file_wanted(void **state)
{
    (void)state;
    const char *yes[] = {"config.json", "generation_config.json", "tokenizer.json",
                         "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                         "model.safetensors", "model-00001-of-00002.safetensors",
                         "model.safetensors.index.json", "vocab.json", "merges.txt",
                         "chat_template.jinja", "qwen.tiktoken"};
    const char *no[] = {"pytorch_model.bin", "model.pth", "model.pt", "model.gguf", "model.onnx",
                        "onnx/model.onnx", "original/consolidated.safetensors", "tf_model.h5",
                        "flax_model.msgpack", "README.md", ".gitattributes", "../config.json",
                        "sub/config.json", "", "configuration_custom.py"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) assert_true(hub_file_wanted(yes[i], false));
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) assert_false(hub_file_wanted(no[i], false));
    assert_false(hub_file_wanted("model.safetensors", true));
    assert_true(hub_file_wanted("config.json", true));
    assert_false(hub_file_wanted(NULL, false));
}

static void test_model_info(void **state)
{
    (void)state;
    char commit[64];
    json_t *sib = NULL;
    const char *ok = "{\"id\":\"a/b\",\"sha\":\"0123456789abcdef0123456789abcdef01234567\","
                     "\"siblings\":[{\"rfilename\":\"config.json\"}]}";
    assert_int_equal(hub_parse_model_info(ok, strlen(ok), commit, sizeof commit, &sib), HUB_OK);
    assert_string_equal(commit, "0123456789abcdef0123456789abcdef01234567");
    assert_int_equal(json_array_size(sib), 1);
    json_decref(sib);
    const char *bad[] = {"", "[]", "{\"sha\":\"xyz\",\"siblings\":[]}",
                         "{\"sha\":\"0123456789abcdef0123456789abcdef01234567\"}",
                         "{\"sha\":\"../../../../etc/passwd/aaaaaaaaaaaaaaaaaaaaaaa\",\"siblings\":[]}",
                         "{\"sha\":\"0123456789ABCDEF0123456789abcdef01234567\",\"siblings\":[]}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(hub_parse_model_info(bad[i], strlen(bad[i]), commit, sizeof commit, &sib), HUB_EPROTO);
        assert_null(sib);
    }
}

static void feed(hub_head_info *hi, const char *line) { hub_parse_header_line(hi, line, strlen(line)); }

static void test_headers(void **state)
{
    (void)state;
    hub_head_info hi;
    hub_head_info_reset(&hi);
    feed(&hi, "HTTP/1.1 302 Found\r\n");
    feed(&hi, "x-linked-etag: \"abc123\"\r\n");
    feed(&hi, "X-Linked-Size: 2626168\r\n");
    feed(&hi, "ETag: W/\"deadbeef\"\r\n");
    feed(&hi, "Content-Length: 0\r\n");
    assert_string_equal(hi.linked_etag, "abc123");
    assert_string_equal(hi.etag, "deadbeef");
    assert_true(hi.linked_size == 2626168);
    assert_true(hi.size == 0);
    feed(&hi, "HTTP/1.1 200 OK\r\n"); /* next response in a redirect chain */
    assert_string_equal(hi.etag, "");
    assert_true(hi.linked_size == -1);
    feed(&hi, "ETagX: nope\r\n");
    feed(&hi, "ETag:\r\n");
    assert_string_equal(hi.etag, "");
}

static void test_bad_ids(void **state)
{
    (void)state;
    char dir[PATH_MAX], err[512];
    hub_opts o = {.offline = true};
    const char *bad[] = {"../x", "a/b/c", "a//b", "-a/b", "a/b..c", "a--b/c", "a/b c", "/nonexistent/folder", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(hub_resolve(bad[i], &o, dir, sizeof dir, err, sizeof err), HUB_EINVAL);
        assert_true(strlen(err) > 0);
    }
    o.revision = "../../etc";
    assert_int_equal(hub_resolve("org/name", &o, dir, sizeof dir, err, sizeof err), HUB_EINVAL);
    assert_string_equal(err, "invalid revision '../../etc'");
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_offline_cache(void **state)
{
    (void)state;
    char root[] = "/tmp/sglc_test_hub_XXXXXX";
    assert_non_null(mkdtemp(root));
    char p[PATH_MAX], dir[PATH_MAX], err[512];
    const char *commit = "0123456789abcdef0123456789abcdef01234567";
    hub_opts o = {.offline = true, .cache_dir = root};
    /* missing: clear error naming the repo */
    assert_int_equal(hub_resolve("org/name", &o, dir, sizeof dir, err, sizeof err), HUB_EOFFLINE);
    assert_non_null(strstr(err, "repo 'org/name' revision 'main' is not in the cache"));
    /* build refs/main + snapshot with config.json */
    snprintf(p, sizeof p, "%s/models--org--name", root);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/models--org--name/refs", root);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/models--org--name/refs/main", root);
    write_file(p, commit);
    snprintf(p, sizeof p, "%s/models--org--name/snapshots", root);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/models--org--name/snapshots/%s", root, commit);
    assert_int_equal(mkdir(p, 0755), 0);
    /* a snapshot without config.json does not count */
    assert_int_equal(hub_resolve("org/name", &o, dir, sizeof dir, err, sizeof err), HUB_EOFFLINE);
    snprintf(p, sizeof p, "%s/models--org--name/snapshots/%s/config.json", root, commit);
    write_file(p, "{}");
    assert_int_equal(hub_resolve("org/name", &o, dir, sizeof dir, err, sizeof err), HUB_OK);
    snprintf(p, sizeof p, "%s/models--org--name/snapshots/%s", root, commit);
    assert_string_equal(dir, p);
    /* by commit id too */
    o.revision = commit;
    assert_int_equal(hub_resolve("org/name", &o, dir, sizeof dir, err, sizeof err), HUB_OK);
    assert_string_equal(dir, p);
    /* the local folder passes through, absolute */
    assert_int_equal(hub_resolve(root, &o, dir, sizeof dir, err, sizeof err), HUB_OK);
    assert_string_equal(dir, root);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_wanted), cmocka_unit_test(test_model_info),
        cmocka_unit_test(test_headers),     cmocka_unit_test(test_bad_ids),
        cmocka_unit_test(test_offline_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
