/* hub_reply — see hub_reply.h: the hub server's replies as pure functions.
 *
 * DESIGN: no state, no I/O; every function reads only its arguments, so
 * tests/fuzz/fuzz_hub_reply.c runs them at in-memory speed.  The rules
 * that keep a hostile server out of the file system live here: file
 * names are plain top-level names (name_safe), etags become blob file
 * names only as [A-Za-z0-9_-] tokens (token_ok), commits are 40 hex. */
#include "hub/hub_reply.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hub/hub.h"

bool hub_is_commit(const char *s)
{
    size_t i = 0;
    for (; s[i]; i++)
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i])) return false;
    return i == 40;
}

/* etags become file names: [A-Za-z0-9_-] only (hex in practice). */
static bool token_ok(const char *s, size_t max)
{
    size_t i = 0;
    for (; s[i]; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '-' || s[i] == '_')) return false;
    return i > 0 && i <= max;
}

static bool name_safe(const char *f)
{
    size_t n = strlen(f);
    if (n == 0 || n > 255 || f[0] == '.') return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)f[i] < 0x20 || f[i] == '/' || f[i] == '\\' || f[i] == 0x7f) return false;
    return true;
}

static bool ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

bool hub_file_wanted(const char *f, bool skip_weights)
{
    static const char *const exact[] = {
        "config.json",          "generation_config.json", "tokenizer.json",
        "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
        "vocab.json",           "vocab.txt",              "merges.txt",
        "tokenizer.model",      "chat_template.jinja",    "chat_template.json",
    };
    if (!f || !name_safe(f)) return false;
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (!strcmp(f, exact[i])) return true;
    if (ends_with(f, ".tiktoken")) return true;
    if (ends_with(f, ".safetensors.index.json")) return true;
    if (ends_with(f, ".safetensors")) return !skip_weights;
    return false;
}

int hub_parse_model_info(const char *body, size_t len, char *commit, size_t commit_n, json_t **siblings)
{
    *siblings = NULL;
    json_t *j = json_loadb(body, len, 0, NULL);
    const char *sha = json_string_value(json_object_get(j, "sha"));
    json_t *sib = json_object_get(j, "siblings");
    int rc = HUB_EPROTO;
    if (sha && hub_is_commit(sha) && json_is_array(sib) && commit_n > 40) {
        memcpy(commit, sha, 41);
        *siblings = json_incref(sib);
        rc = HUB_OK;
    }
    json_decref(j);
    return rc;
}

const char *hub_pick_index(const json_t *siblings, bool skip_weights)
{
    const char *index_name = NULL;
    for (size_t i = 0; i < json_array_size(siblings); i++) {
        const char *f = json_string_value(json_object_get(json_array_get(siblings, i), "rfilename"));
        if (f && hub_file_wanted(f, skip_weights) && ends_with(f, ".safetensors.index.json") &&
            (!index_name || !strcmp(f, "model.safetensors.index.json")))
            index_name = f;
    }
    return index_name;
}

bool hub_file_in_pass(const char *f, int pass, bool skip_weights, const json_t *shards)
{
    if (!f || !hub_file_wanted(f, skip_weights)) return false;
    bool weight = ends_with(f, ".safetensors");
    if (weight != (pass == 1)) return false;
    return !(weight && shards && !json_object_get(shards, f));
}

json_t *hub_parse_index_shards(const char *body, size_t len)
{
    json_t *j = json_loadb(body, len, 0, NULL);
    json_t *map = json_object_get(j, "weight_map");
    json_t *set = json_is_object(map) ? json_object() : NULL;
    const char *k;
    json_t *v;
    if (set)
        json_object_foreach(map, k, v)
            if (json_is_string(v)) json_object_set_new(set, json_string_value(v), json_true());
    json_decref(j);
    return set;
}

static void header_value(const char *line, size_t n, char *out, size_t outn)
{
    const char *colon = memchr(line, ':', n);
    if (!colon) return;
    const char *v = colon + 1, *e = line + n;
    while (v < e && (*v == ' ' || *v == '\t')) v++;
    while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' ')) e--;
    /* W/"abc" -> abc */
    if (e - v >= 2 && v[0] == 'W' && v[1] == '/') v += 2;
    if (e - v >= 2 && *v == '"' && e[-1] == '"') v++, e--;
    snprintf(out, outn, "%.*s", (int)(e - v), v);
}

static bool header_is(const char *line, size_t n, const char *name)
{
    size_t m = strlen(name);
    return n > m && line[m] == ':' && !strncasecmp(line, name, m);
}

void hub_head_info_reset(hub_head_info *hi)
{
    memset(hi, 0, sizeof *hi);
    hi->size = hi->linked_size = -1;
}

void hub_parse_header_line(hub_head_info *hi, const char *line, size_t n)
{
    char v[160];
    if (n >= 5 && !strncmp(line, "HTTP/", 5)) {
        hub_head_info_reset(hi);
    } else if (header_is(line, n, "X-Linked-Etag")) {
        header_value(line, n, hi->linked_etag, sizeof hi->linked_etag);
    } else if (header_is(line, n, "ETag")) {
        header_value(line, n, hi->etag, sizeof hi->etag);
    } else if (header_is(line, n, "X-Linked-Size")) {
        v[0] = 0;
        header_value(line, n, v, sizeof v);
        hi->linked_size = strtoll(v, NULL, 10);
    } else if (header_is(line, n, "Content-Length")) {
        v[0] = 0;
        header_value(line, n, v, sizeof v);
        hi->size = strtoll(v, NULL, 10);
    }
}

enum hub_head_verdict hub_head_decide(const hub_head_info *hi, long code, bool followed, char *etag,
                                      size_t etagn, long long *size)
{
    bool redirect = code >= 300 && code < 400;
    if (code != 200 && !redirect) return HUB_HEAD_FAIL;
    const char *e = hi->linked_etag[0] ? hi->linked_etag : hi->etag;
    if (!e[0] && redirect && !followed) return HUB_HEAD_FOLLOW;
    if (!token_ok(e, 128)) return HUB_HEAD_NO_ETAG;
    snprintf(etag, etagn, "%s", e);
    *size = hi->linked_size >= 0 ? hi->linked_size : (code == 200 ? hi->size : -1);
    if (*size < 0) *size = -1; /* a negative length is no length (hub.c tests size < 0) */
    return HUB_HEAD_USE;
}

int hub_http_status(long code)
{
    if (code == 401 || code == 403) return HUB_EAUTH;
    if (code == 404) return HUB_ENOTFOUND;
    return HUB_ENET;
}

enum hub_body_action hub_body_start(long code, long long off)
{
    if (code == 200 && off > 0) return HUB_BODY_RESTART;
    if (code != 200 && code != 206) return HUB_BODY_DISCARD;
    return HUB_BODY_APPEND;
}

enum hub_xfer_next hub_transfer_next(bool ok, long code, bool started, long long *off, long long size,
                                     int attempt, int max_attempts, bool *truncate)
{
    *truncate = false;
    if (ok && code == 200 && !started && *off > 0) { /* an empty 200 to a Range request */
        *truncate = true;
        *off = 0;
    }
    if (ok && code == 416 && *off > 0 && attempt < max_attempts) {
        *truncate = true;
        *off = 0;
        return HUB_XFER_RESTART;
    }
    if (ok && code != 200 && code != 206) return HUB_XFER_FAIL;
    if (ok && (size < 0 || *off == size)) return HUB_XFER_DONE;
    if (ok && *off > size) {
        *truncate = true;
        return HUB_XFER_TOO_LONG;
    }
    if (attempt >= max_attempts) return HUB_XFER_GIVE_UP;
    return HUB_XFER_RETRY;
}
