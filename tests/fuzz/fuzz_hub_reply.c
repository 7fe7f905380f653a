/* fuzz_hub_reply — what a (hostile) hub server sends, through every
 * decision src/hub takes on it (src/hub/hub_reply.h), with no connection:
 *   - the bytes as the model-info JSON (sha + siblings) and as a
 *     safetensors index (weight_map), then the file plan of both passes
 *     (index choice, small files, weights limited to the index's shards);
 *   - the bytes as HEAD header lines, then the HEAD verdict for a status
 *     code drawn from the input;
 *   - the Range-resume protocol: a run of GET attempts (status, clean end
 *     or not, bytes received) drawn from the input, against the sizes the
 *     headers gave.
 * Must never crash or leak, never accept a name with a path in it or an
 * etag that is not a plain token, never call a download complete at the
 * wrong size, never loop past the attempt limit. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hub/hub.h"
#include "util/rng.h"

#define MAX_ATTEMPTS 5

static bool ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

static void check_plan(json_t *sib, const json_t *shards)
{
    for (int skip = 0; skip < 2; skip++) {
        const char *idx = hub_pick_index(sib, skip);
        if (idx && (!hub_file_wanted(idx, skip) || !ends_with(idx, ".safetensors.index.json"))) abort();
        size_t i;
        json_t *s;
        json_array_foreach(sib, i, s) {
            const char *f = json_string_value(json_object_get(s, "rfilename"));
            if (f && hub_file_wanted(f, skip) && (strchr(f, '/') || strchr(f, '\\') || f[0] == '.')) abort();
            bool in0 = hub_file_in_pass(f, 0, skip, shards), in1 = hub_file_in_pass(f, 1, skip, shards);
            if (in0 && in1) abort();
            if ((in0 || in1) && !hub_file_wanted(f, skip)) abort();
            if (in1 && (skip || !ends_with(f, ".safetensors") || (shards && !json_object_get(shards, f))))
                abort();
            if (in0 && ends_with(f, ".safetensors")) abort();
        }
    }
}

static bool token_only(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 128) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              s[i] == '-' || s[i] == '_'))
            return false;
    return true;
}

static const long k_codes[] = {200, 206, 301, 302, 307, 308, 304, 401, 403, 404, 416, 429, 500, 503, 0, 100};

/* GET attempts until the protocol stops, driven by g. */
static void check_transfer(uint64_t *g, long long size)
{
    long long off = (long long)(rng_next(g) % 4) == 0 ? 0 : (long long)(rng_next(g) % 4096);
    if (size >= 0 && off > size) off = 0; /* fetch_file truncates a too-long partial file first */
    for (int attempt = 1; size < 0 || off < size; attempt++) {
        if (attempt > 2 * MAX_ATTEMPTS) abort(); /* restarts are bounded by the attempt limit too */
        long code = k_codes[rng_next(g) % (sizeof k_codes / sizeof k_codes[0])];
        bool ok = rng_next(g) & 1;
        long long got = 0;
        bool started = rng_next(g) % 4 != 0;
        enum hub_body_action act = started ? hub_body_start(code, off) : HUB_BODY_APPEND;
        if (act == HUB_BODY_APPEND && started && code != 200 && code != 206) abort();
        if (act == HUB_BODY_RESTART) {
            if (code != 200 || off <= 0) abort();
            off = 0;
        }
        if (started && act != HUB_BODY_DISCARD) got = (long long)(rng_next(g) % 8192);
        off += got;
        long long before = off;
        bool trunc;
        enum hub_xfer_next nx = hub_transfer_next(ok, code, started, &off, size, attempt, MAX_ATTEMPTS, &trunc);
        if (off < 0 || (trunc && nx != HUB_XFER_TOO_LONG && off != 0) || (!trunc && off != before)) abort();
        switch (nx) {
        case HUB_XFER_DONE:
            if (!ok || (size >= 0 && off != size) || (code != 200 && code != 206)) abort();
            return;
        case HUB_XFER_RESTART:
            if (code != 416 || !trunc || attempt >= MAX_ATTEMPTS) abort();
            continue;
        case HUB_XFER_FAIL:
            if (!ok || code == 200 || code == 206) abort();
            return;
        case HUB_XFER_TOO_LONG:
            if (!ok || size < 0 || off <= size) abort();
            return;
        case HUB_XFER_GIVE_UP:
            if (attempt < MAX_ATTEMPTS) abort();
            return;
        case HUB_XFER_RETRY:
            if (attempt >= MAX_ATTEMPTS) abort();
            break;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p0 = (const char *)data;
    /* the bytes as JSON: model info, safetensors index, then the file plan */
    json_t *shards = hub_parse_index_shards(p0, size);
    char commit[64];
    json_t *sib = NULL;
    if (hub_parse_model_info(p0, size, commit, sizeof commit, &sib) == HUB_OK) {
        if (strlen(commit) != 40 || !hub_is_commit(commit)) abort();
        check_plan(sib, NULL);
        if (shards) check_plan(sib, shards);
        json_decref(sib);
    }
    json_decref(shards);

    /* the same bytes as header lines */
    hub_head_info hi;
    hub_head_info_reset(&hi);
    const char *p = p0, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p + 1) : (size_t)(end - p);
        hub_parse_header_line(&hi, p, n);
        p += n;
    }
    if (memchr(hi.etag, 0, sizeof hi.etag) == NULL || memchr(hi.linked_etag, 0, sizeof hi.linked_etag) == NULL)
        abort();

    /* decisions on a status code and attempts drawn from the input */
    uint64_t g = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < size; i++) g = (g ^ data[i]) * 0x100000001b3ull;
    long code = k_codes[rng_next(&g) % (sizeof k_codes / sizeof k_codes[0])];
    int st = hub_http_status(code);
    if (st != HUB_EAUTH && st != HUB_ENOTFOUND && st != HUB_ENET) abort();
    for (int followed = 0; followed < 2; followed++) {
        char etag[160] = "";
        long long fsize = -2;
        enum hub_head_verdict v = hub_head_decide(&hi, code, followed, etag, sizeof etag, &fsize);
        if (v == HUB_HEAD_USE) {
            if (!token_only(etag) || fsize < -1 || (code != 200 && (code < 300 || code >= 400))) abort();
            check_transfer(&g, fsize);
        }
        if (v == HUB_HEAD_FOLLOW && (followed || code < 300 || code >= 400)) abort();
        if (v == HUB_HEAD_FAIL && (code == 200 || (code >= 300 && code < 400))) abort();
    }
    check_transfer(&g, -1);
    return 0;
}
