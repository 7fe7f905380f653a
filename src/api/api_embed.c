/* api_embed — see api_embed.h. */
#include "api/api_embed.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)s[i])) return false;
    return true;
}

void api_embed_req_free(api_embed_req *r)
{
    if (!r) return;
    for (int i = 0; i < r->n; i++) {
        free(r->items[i].text);
        free(r->items[i].ids);
    }
    if (r->rids)
        for (int i = 0; i < r->n; i++) free(r->rids[i]);
    free(r->items);
    free(r->rids);
    memset(r, 0, sizeof *r);
}

static int fail(api_embed_req *out, char *err, size_t errlen, const char *msg)
{
    snprintf(err, errlen, "%s", msg);
    api_embed_req_free(out);
    return -1;
}

static int add_text(api_embed_req *out, int i, const json_t *s)
{
    size_t n = json_string_length(s);
    char *t = malloc(n + 1);
    if (!t) return -1;
    memcpy(t, json_string_value(s), n);
    t[n] = 0;
    out->items[i].text = t;
    out->items[i].text_len = n;
    return 0;
}

/* ids of a JSON integer array already checked to hold only integers in
 * [0, INT32_MAX] */
static int add_ids(api_embed_req *out, int i, const json_t *a)
{
    size_t n = json_array_size(a);
    int32_t *ids = malloc(sizeof(int32_t) * (n ? n : 1));
    if (!ids) return -1;
    for (size_t k = 0; k < n; k++) ids[k] = (int32_t)json_integer_value(json_array_get(a, k));
    out->items[i].ids = ids;
    out->items[i].n_ids = (int64_t)n;
    return 0;
}

static bool all_ints(const json_t *a, bool *negative, bool *huge)
{
    *negative = *huge = false;
    size_t k;
    json_t *v;
    json_array_foreach(a, k, v) {
        if (!json_is_integer(v)) return false;
        if (json_integer_value(v) < 0) *negative = true;
        if (json_integer_value(v) > INT32_MAX) *huge = true;
    }
    return true;
}

static int alloc_items(api_embed_req *out, size_t n)
{
    if (n > 1u << 20) return -1;
    out->items = calloc(n ? n : 1, sizeof *out->items);
    if (!out->items) return -1;
    out->n = (int)n;
    return 0;
}

/* The input value (OpenAI `input`, or native text/input_ids) -> items,
 * with serving_embedding.py's checks. */
static int parse_input(const json_t *in, bool oai, api_embed_req *out, char *err, size_t errlen)
{
    char msg[160];
    if (json_is_string(in)) {
        const char *s = json_string_value(in);
        size_t n = json_string_length(in);
        if (oai && n == 0) return fail(out, err, errlen, "Input cannot be empty");
        if (oai && blank(s, n)) return fail(out, err, errlen, "Input cannot be empty or whitespace only");
        if (alloc_items(out, 1) || add_text(out, 0, in)) return fail(out, err, errlen, "Internal error: out of memory.");
        out->single = true;
        return 0;
    }
    if (!json_is_array(in)) return fail(out, err, errlen, "input must be a string, a list of strings, a list of token ids or a list of token id lists");
    size_t n = json_array_size(in);
    if (n == 0) return fail(out, err, errlen, "Input cannot be empty");
    const json_t *first = json_array_get(in, 0);
    if (json_is_string(first)) {
        size_t k;
        json_t *v;
        json_array_foreach(in, k, v) {
            if (!json_is_string(v)) return fail(out, err, errlen, "All items in input list must be strings");
            if (oai && blank(json_string_value(v), json_string_length(v))) {
                snprintf(msg, sizeof msg, "Input at index %zu cannot be empty or whitespace only", k);
                return fail(out, err, errlen, msg);
            }
        }
        if (alloc_items(out, n)) return fail(out, err, errlen, "Too many inputs.");
        for (size_t i = 0; i < n; i++)
            if (add_text(out, (int)i, json_array_get(in, i))) return fail(out, err, errlen, "Internal error: out of memory.");
        return 0;
    }
    if (json_is_integer(first)) {
        bool neg, huge;
        size_t k;
        json_t *v;
        json_array_foreach(in, k, v) {
            if (!json_is_integer(v)) return fail(out, err, errlen, "All items in input list must be integers");
            if (json_integer_value(v) < 0) {
                snprintf(msg, sizeof msg, "Token ID at index %zu must be non-negative", k);
                return fail(out, err, errlen, msg);
            }
        }
        all_ints(in, &neg, &huge);
        if (huge) return fail(out, err, errlen, "Token ids must fit in 32 bits.");
        if (alloc_items(out, 1) || add_ids(out, 0, in)) return fail(out, err, errlen, "Internal error: out of memory.");
        out->single = true;
        return 0;
    }
    if (json_is_array(first)) {
        size_t k;
        json_t *v;
        json_array_foreach(in, k, v) {
            bool neg, huge;
            if (!json_is_array(v)) {
                snprintf(msg, sizeof msg, "Input at index %zu must be a list", k);
                return fail(out, err, errlen, msg);
            }
            if (json_array_size(v) == 0) {
                snprintf(msg, sizeof msg, "Input at index %zu cannot be empty", k);
                return fail(out, err, errlen, msg);
            }
            if (!all_ints(v, &neg, &huge)) {
                snprintf(msg, sizeof msg, "Input at index %zu must contain only integers", k);
                return fail(out, err, errlen, msg);
            }
            if (neg) {
                snprintf(msg, sizeof msg, "Input at index %zu contains negative token IDs", k);
                return fail(out, err, errlen, msg);
            }
            if (huge) return fail(out, err, errlen, "Token ids must fit in 32 bits.");
        }
        if (alloc_items(out, n)) return fail(out, err, errlen, "Too many inputs.");
        for (size_t i = 0; i < n; i++)
            if (add_ids(out, (int)i, json_array_get(in, i))) return fail(out, err, errlen, "Internal error: out of memory.");
        return 0;
    }
    if (json_is_object(first))
        return fail(out, err, errlen, "Multimodal embedding inputs (text + image) are not supported by sglc.");
    return fail(out, err, errlen, "input must be a string, a list of strings, a list of token ids or a list of token id lists");
}

static int parse_rids(const json_t *rid, api_embed_req *out, char *err, size_t errlen)
{
    if (!rid || json_is_null(rid)) return 0;
    out->rids = calloc((size_t)out->n, sizeof(char *));
    if (!out->rids) return fail(out, err, errlen, "Internal error: out of memory.");
    if (json_is_string(rid) && out->n == 1) {
        out->rids[0] = strdup(json_string_value(rid));
        if (!out->rids[0]) return fail(out, err, errlen, "Internal error: out of memory.");
        return 0;
    }
    if (!json_is_array(rid) || json_array_size(rid) != (size_t)out->n)
        return fail(out, err, errlen, "rid must be a string for one input or a list with one string per input");
    for (int i = 0; i < out->n; i++) {
        const json_t *v = json_array_get(rid, (size_t)i);
        if (!json_is_string(v)) return fail(out, err, errlen, "rid must be a string for one input or a list with one string per input");
        out->rids[i] = strdup(json_string_value(v));
        if (!out->rids[i]) return fail(out, err, errlen, "Internal error: out of memory.");
    }
    return 0;
}

int api_embed_parse(const json_t *body, bool oai, api_embed_req *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!json_is_object(body)) return fail(out, err, errlen, "The request body must be a JSON object.");
    const json_t *dims = json_object_get(body, "dimensions");
    if (dims && !json_is_null(dims)) {
        if (!json_is_integer(dims)) return fail(out, err, errlen, "dimensions must be an integer");
        out->has_dims = true;
        out->dims = json_integer_value(dims);
    }
    if (oai) {
        const json_t *ef = json_object_get(body, "encoding_format");
        if (ef && !json_is_null(ef)) {
            const char *f = json_string_value(ef);
            if (!f || (strcmp(f, "float") && strcmp(f, "base64")))
                return fail(out, err, errlen, "encoding_format must be 'float' or 'base64'");
            out->base64 = !strcmp(f, "base64");
        }
        const json_t *m = json_object_get(body, "model");
        if (m && !json_is_null(m) && !json_is_string(m)) return fail(out, err, errlen, "model must be a string");
        const json_t *in = json_object_get(body, "input");
        if (!in || json_is_null(in)) return fail(out, err, errlen, "input: Field required");
        bool has_dims = out->has_dims, b64 = out->base64;
        int64_t d = out->dims;
        if (parse_input(in, true, out, err, errlen)) return -1;
        out->has_dims = has_dims, out->base64 = b64, out->dims = d;
    } else {
        const json_t *text = json_object_get(body, "text"), *ids = json_object_get(body, "input_ids");
        bool has_text = text && !json_is_null(text), has_ids = ids && !json_is_null(ids);
        if (has_text == has_ids) return fail(out, err, errlen, "Either text or input_ids should be provided.");
        if (has_text && !json_is_string(text) &&
            !(json_is_array(text) && json_array_size(text) && json_is_string(json_array_get(text, 0))))
            return fail(out, err, errlen, "text must be a string or a non-empty list of strings");
        if (has_ids && !(json_is_array(ids) && json_array_size(ids) &&
                         !json_is_string(json_array_get(ids, 0))))
            return fail(out, err, errlen, "input_ids must be a list of token ids or a list of token id lists");
        bool has_dims = out->has_dims;
        int64_t d = out->dims;
        if (parse_input(has_text ? text : ids, false, out, err, errlen)) return -1;
        out->has_dims = has_dims, out->dims = d;
    }
    return parse_rids(json_object_get(body, "rid"), out, err, errlen);
}

int api_embed_check_dims(const api_embed_model *m, int64_t dims, char *err, size_t errlen)
{
    const char *mp = m->model_path ? m->model_path : "";
    if (!m->is_matryoshka) {
        snprintf(err, errlen,
                 "Model '%.400s' does not support matryoshka representation, changing output dimensions will "
                 "lead to poor results.",
                 mp);
        return -1;
    }
    if (dims < 1) {
        snprintf(err, errlen, "Requested dimensions must be greater than 0");
        return -1;
    }
    if (m->n_mdims > 0) {
        bool ok = false;
        for (int i = 0; i < m->n_mdims; i++) ok |= m->mdims[i] == dims;
        if (!ok) {
            /* Python's str() of the list: [64, 128] */
            char list[256];
            size_t o = 0;
            list[o++] = '[';
            for (int i = 0; i < m->n_mdims && o < sizeof list - 16; i++)
                o += (size_t)snprintf(list + o, sizeof list - o, "%s%d", i ? ", " : "", m->mdims[i]);
            snprintf(list + o, sizeof list - o, "]");
            snprintf(err, errlen,
                     "Model '%.300s' only supports %s matryoshka dimensions, using other output dimensions will "
                     "lead to poor results.",
                     mp, list);
            return -1;
        }
    }
    if (dims > m->hidden_size) {
        snprintf(err, errlen, "Provided dimensions are greater than max embedding dimension: %d", m->hidden_size);
        return -1;
    }
    return 0;
}

char *api_embed_base64(const float *v, int n)
{
    static const char tb[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t nb = (size_t)(n > 0 ? n : 0) * 4;
    char *out = malloc((nb + 2) / 3 * 4 + 1);
    if (!out) return NULL;
    unsigned char *b = malloc(nb ? nb : 1);
    if (!b) {
        free(out);
        return NULL;
    }
    for (int i = 0; i < n; i++) { /* little-endian float32 whatever the host order */
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int k = 0; k < 4; k++) b[(size_t)i * 4 + (size_t)k] = (unsigned char)(u >> (8 * k));
    }
    size_t o = 0, i = 0;
    for (; i + 2 < nb; i += 3) {
        uint32_t w = (uint32_t)b[i] << 16 | (uint32_t)b[i + 1] << 8 | b[i + 2];
        out[o++] = tb[w >> 18 & 63], out[o++] = tb[w >> 12 & 63], out[o++] = tb[w >> 6 & 63], out[o++] = tb[w & 63];
    }
    if (nb - i == 1) {
        uint32_t w = (uint32_t)b[i] << 16;
        out[o++] = tb[w >> 18 & 63], out[o++] = tb[w >> 12 & 63], out[o++] = '=', out[o++] = '=';
    } else if (nb - i == 2) {
        uint32_t w = (uint32_t)b[i] << 16 | (uint32_t)b[i + 1] << 8;
        out[o++] = tb[w >> 18 & 63], out[o++] = tb[w >> 12 & 63], out[o++] = tb[w >> 6 & 63], out[o++] = '=';
    }
    out[o] = 0;
    free(b);
    return out;
}

json_t *api_embed_float_array(const float *v, int n)
{
    json_t *a = json_array();
    if (!a) return NULL;
    for (int i = 0; i < n; i++)
        if (json_array_append_new(a, json_real((double)v[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}
