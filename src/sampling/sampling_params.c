/* sampling_params — see sampling_params.h. */
#include "sampling/sampling_params.h"

#include "util/errmsg.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


void sampling_params_init(sampling_params *p)
{
    memset(p, 0, sizeof *p);
    p->has_max_new_tokens = true;
    p->max_new_tokens = 128;
    p->temperature = 1.0;
    p->top_p = 1.0;
    p->top_k = SAMPLING_TOP_K_ALL;
    p->min_p = 0.0;
    p->repetition_penalty = 1.0;
    p->n = 1;
    p->skip_special_tokens = true;
    p->spaces_between_special_tokens = true;
}

static void free_strv(char **v, int n)
{
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

void sampling_params_free(sampling_params *p)
{
    free_strv(p->stop, p->n_stop);
    free_strv(p->stop_regex, p->n_stop_regex);
    free(p->stop_token_ids);
    free(p->json_schema);
    free(p->regex);
    free(p->ebnf);
    free(p->structural_tag);
    free(p->custom_params);
    free(p->logit_bias);
    sampling_params_init(p);
}

/* ------------------------------------------------------------ Python repr */

char *sampling_py_float(double x, char *buf, size_t len)
{
    if (isnan(x)) {
        snprintf(buf, len, "nan");
        return buf;
    }
    if (isinf(x)) {
        snprintf(buf, len, x < 0 ? "-inf" : "inf");
        return buf;
    }
    /* Shortest round-tripping digits, as repr does. */
    char e[40];
    int prec;
    for (prec = 0; prec < 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec, x);
        if (strtod(e, NULL) == x) break;
    }
    /* e = [-]d[.ddd]e[+-]XX */
    const char *s = e;
    bool neg = *s == '-';
    if (neg) s++;
    char digits[24];
    int nd = 0;
    const char *q = s;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9') digits[nd++] = *q;
    int exp10 = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    char out[64];
    int o = 0;
    if (neg) out[o++] = '-';
    if (exp10 >= -5 + 1 && exp10 < 16) { /* repr uses positional for 1e-4 <= |x| < 1e16 */
        if (exp10 < 0) {
            out[o++] = '0';
            out[o++] = '.';
            for (int i = 0; i < -exp10 - 1; i++) out[o++] = '0';
            for (int i = 0; i < nd; i++) out[o++] = digits[i];
        } else {
            for (int i = 0; i <= exp10; i++) out[o++] = i < nd ? digits[i] : '0';
            out[o++] = '.';
            if (nd > exp10 + 1)
                for (int i = exp10 + 1; i < nd; i++) out[o++] = digits[i];
            else
                out[o++] = '0';
        }
        out[o] = 0;
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (int i = 1; i < nd; i++) out[o++] = digits[i];
        }
        o += snprintf(out + o, sizeof out - (size_t)o, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    }
    snprintf(buf, len, "%s", out);
    return buf;
}

/* A float field as Python would print the value it was given. */
static const char *pyval(const sampling_params *p, unsigned bit, double v, char *buf, size_t len)
{
    if ((p->given_as_int & bit) && v == floor(v) && fabs(v) < 9.2e18)
        snprintf(buf, len, "%lld", (long long)v);
    else
        sampling_py_float(v, buf, len);
    return buf;
}

/* ------------------------------------------------------------ JSON */

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "value";
}

static int get_number(const json_t *v, const char *key, double *out, unsigned *int_bits, unsigned bit, char *err,
                      size_t errlen)
{
    if (json_is_null(v)) return 0; /* default stays */
    if (!json_is_number(v)) {
        errmsg_set(err, errlen, "sampling_params.%s must be a number, got %s.", key, json_kind(v));
        return -1;
    }
    *out = json_number_value(v);
    if (json_is_integer(v)) *int_bits |= bit;
    else *int_bits &= ~bit;
    return 0;
}

static int get_int(const json_t *v, const char *key, int64_t *out, char *err, size_t errlen)
{
    if (json_is_null(v)) return 0;
    if (!json_is_integer(v)) {
        errmsg_set(err, errlen, "sampling_params.%s must be an integer, got %s.", key, json_kind(v));
        return -1;
    }
    *out = (int64_t)json_integer_value(v);
    return 0;
}

static int get_bool(const json_t *v, const char *key, bool *out, char *err, size_t errlen)
{
    if (json_is_null(v)) return 0;
    if (!json_is_boolean(v)) {
        errmsg_set(err, errlen, "sampling_params.%s must be a boolean, got %s.", key, json_kind(v));
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

static int get_string(const json_t *v, const char *key, char **out, char *err, size_t errlen)
{
    if (json_is_null(v)) return 0;
    if (!json_is_string(v)) {
        errmsg_set(err, errlen, "sampling_params.%s must be a string, got %s.", key, json_kind(v));
        return -1;
    }
    size_t n = json_string_length(v);
    if (memchr(json_string_value(v), 0, n)) {
        errmsg_set(err, errlen, "sampling_params.%s must not contain NUL characters.", key);
        return -1;
    }
    free(*out);
    *out = strdup(json_string_value(v));
    if (!*out) {
        errmsg_set(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* A string or a list of strings (stop, stop_regex). */
static int get_strv(const json_t *v, const char *key, char ***out, int *n_out, char *err, size_t errlen)
{
    if (json_is_null(v)) return 0;
    size_t n = json_is_string(v) ? 1 : json_is_array(v) ? json_array_size(v) : 0;
    if (!json_is_string(v) && !json_is_array(v)) {
        errmsg_set(err, errlen, "sampling_params.%s must be a string or a list of strings, got %s.", key,
                json_kind(v));
        return -1;
    }
    if (n > 1024) {
        errmsg_set(err, errlen, "sampling_params.%s has %zu entries; at most 1024 are allowed.", key, n);
        return -1;
    }
    char **sv = calloc(n ? n : 1, sizeof *sv);
    if (!sv) goto oom;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_is_string(v) ? v : json_array_get(v, i);
        if (!json_is_string(e)) {
            errmsg_set(err, errlen, "sampling_params.%s[%zu] must be a string, got %s.", key, i, json_kind(e));
            free_strv(sv, (int)i);
            return -1;
        }
        if (memchr(json_string_value(e), 0, json_string_length(e))) {
            errmsg_set(err, errlen, "sampling_params.%s[%zu] must not contain NUL characters.", key, i);
            free_strv(sv, (int)i);
            return -1;
        }
        sv[i] = strdup(json_string_value(e));
        if (!sv[i]) {
            free_strv(sv, (int)i);
            goto oom;
        }
    }
    free_strv(*out, *n_out);
    *out = sv;
    *n_out = (int)n;
    return 0;
oom:
    errmsg_set(err, errlen, "out of memory");
    return -1;
}

static int get_stop_token_ids(const json_t *v, sampling_params *p, char *err, size_t errlen)
{
    if (json_is_null(v)) return 0;
    if (!json_is_array(v)) {
        errmsg_set(err, errlen, "sampling_params.stop_token_ids must be a list of integers, got %s.", json_kind(v));
        return -1;
    }
    size_t n = json_array_size(v);
    if (n > 65536) {
        errmsg_set(err, errlen, "sampling_params.stop_token_ids has %zu entries; at most 65536 are allowed.", n);
        return -1;
    }
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) {
        errmsg_set(err, errlen, "out of memory");
        return -1;
    }
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, i);
        if (json_is_null(e)) continue; /* SGLang drops None entries */
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > INT32_MAX) {
            errmsg_set(err, errlen, "sampling_params.stop_token_ids[%zu] must be a token id (integer >= 0), got %s.",
                    i, json_is_integer(e) ? "a negative or too large integer" : json_kind(e));
            free(ids);
            return -1;
        }
        int32_t id = (int32_t)json_integer_value(e);
        bool dup = false; /* a set in SGLang; lists are short */
        for (int j = 0; j < k && !dup; j++) dup = ids[j] == id;
        if (!dup) ids[k++] = id;
    }
    free(p->stop_token_ids);
    p->stop_token_ids = ids;
    p->n_stop_token_ids = k;
    return 0;
}

/* Python's int(str): optional spaces, sign, digits with single '_'
 * separators, optional spaces. */
static bool py_int_from_str(const char *s, long long *out)
{
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\f' || *s == '\v') s++;
    bool neg = false;
    if (*s == '+' || *s == '-') neg = *s++ == '-';
    if (*s < '0' || *s > '9') return false;
    long long v = 0;
    bool overflow = false;
    while ((*s >= '0' && *s <= '9') || (*s == '_' && s[1] >= '0' && s[1] <= '9')) {
        if (*s != '_') {
            if (v > (LLONG_MAX - 9) / 10) overflow = true;
            else v = v * 10 + (*s - '0');
        }
        s++;
    }
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\f' || *s == '\v') s++;
    if (*s) return false;
    *out = overflow ? (neg ? LLONG_MIN : LLONG_MAX) : neg ? -v : v;
    return true;
}

static int get_logit_bias(const json_t *v, sampling_params *p, char *err, size_t errlen)
{
    if (json_is_null(v)) return 0;
    if (!json_is_object(v)) {
        errmsg_set(err, errlen, "sampling_params.logit_bias must be an object mapping token ids to numbers, got %s.",
                json_kind(v));
        return -1;
    }
    size_t n = json_object_size(v);
    if (n > 1 << 20) {
        errmsg_set(err, errlen, "sampling_params.logit_bias has too many entries (%zu).", n);
        return -1;
    }
    sampling_logit_bias *lb = malloc((n ? n : 1) * sizeof *lb);
    if (!lb) {
        errmsg_set(err, errlen, "out of memory");
        return -1;
    }
    int k = 0;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        long long id;
        if (!py_int_from_str(key, &id)) {
            errmsg_set(err, errlen, "invalid literal for int() with base 10: '%.64s'", key);
            free(lb);
            return -1;
        }
        if (!json_is_number(val)) {
            errmsg_set(err, errlen, "sampling_params.logit_bias['%.64s'] must be a number, got %s.", key,
                    json_kind(val));
            free(lb);
            return -1;
        }
        double bv = json_number_value(val);
        if (!(fabs(bv) <= 1e30)) { /* a float32 bias beyond this turns logits into inf/NaN */
            errmsg_set(err, errlen, "sampling_params.logit_bias['%.64s'] must be a finite number of magnitude at most 1e30, got %g.",
                       key, bv);
            free(lb);
            return -1;
        }
        /* out-of-range ids are kept (clamped) so that verify() reports them
         * with SGLang's message */
        lb[k].token = id < INT32_MIN ? INT32_MIN : id > INT32_MAX ? INT32_MAX : (int32_t)id;
        lb[k].bias = (float)bv;
        k++;
    }
    free(p->logit_bias);
    p->logit_bias = lb;
    p->n_logit_bias = k;
    return 0;
}

static const char *const known_keys[] = {
    "max_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p", "top_k", "min_p",
    "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens", "n", "json_schema", "regex",
    "ebnf", "structural_tag", "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens",
    "no_stop_trim", "custom_params", "stream_interval", "logit_bias", "sampling_seed", NULL};

int sampling_params_from_json(sampling_params *p, const json_t *obj, char *err, size_t errlen)
{
    sampling_params_init(p);
    if (!obj || json_is_null(obj)) return 0;
    if (!json_is_object(obj)) {
        errmsg_set(err, errlen, "sampling_params must be an object, got %s.", json_kind(obj));
        return -1;
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        bool known = false;
        for (int i = 0; known_keys[i] && !known; i++) known = strcmp(key, known_keys[i]) == 0;
        if (!known) {
            errmsg_set(err, errlen, "Unexpected keyword argument '%.64s'", key);
            goto fail;
        }
    }
#define F(name) json_object_get(obj, name)
    json_t *mnt = F("max_new_tokens");
    if (mnt && json_is_null(mnt)) p->has_max_new_tokens = false;
    else if (mnt && get_int(mnt, "max_new_tokens", &p->max_new_tokens, err, errlen)) goto fail;
    if (F("stop") && get_strv(F("stop"), "stop", &p->stop, &p->n_stop, err, errlen)) goto fail;
    if (F("stop_regex") && get_strv(F("stop_regex"), "stop_regex", &p->stop_regex, &p->n_stop_regex, err, errlen))
        goto fail;
    if (F("stop_token_ids") && get_stop_token_ids(F("stop_token_ids"), p, err, errlen)) goto fail;
    if (F("temperature") &&
        get_number(F("temperature"), "temperature", &p->temperature, &p->given_as_int, SP_INT_TEMPERATURE, err, errlen))
        goto fail;
    if (F("top_p") && get_number(F("top_p"), "top_p", &p->top_p, &p->given_as_int, SP_INT_TOP_P, err, errlen))
        goto fail;
    int64_t top_k = -1;
    if (F("top_k") && get_int(F("top_k"), "top_k", &top_k, err, errlen)) goto fail;
    p->top_k = top_k;
    if (F("min_p") && get_number(F("min_p"), "min_p", &p->min_p, &p->given_as_int, SP_INT_MIN_P, err, errlen))
        goto fail;
    if (F("frequency_penalty") && get_number(F("frequency_penalty"), "frequency_penalty", &p->frequency_penalty,
                                             &p->given_as_int, SP_INT_FREQUENCY, err, errlen))
        goto fail;
    if (F("presence_penalty") && get_number(F("presence_penalty"), "presence_penalty", &p->presence_penalty,
                                            &p->given_as_int, SP_INT_PRESENCE, err, errlen))
        goto fail;
    if (F("repetition_penalty") && get_number(F("repetition_penalty"), "repetition_penalty", &p->repetition_penalty,
                                              &p->given_as_int, SP_INT_REPETITION, err, errlen))
        goto fail;
    if (F("min_new_tokens") && get_int(F("min_new_tokens"), "min_new_tokens", &p->min_new_tokens, err, errlen))
        goto fail;
    if (F("n") && get_int(F("n"), "n", &p->n, err, errlen)) goto fail;
    if (F("json_schema") && get_string(F("json_schema"), "json_schema", &p->json_schema, err, errlen)) goto fail;
    if (F("regex") && get_string(F("regex"), "regex", &p->regex, err, errlen)) goto fail;
    if (F("ebnf") && get_string(F("ebnf"), "ebnf", &p->ebnf, err, errlen)) goto fail;
    if (F("structural_tag") && get_string(F("structural_tag"), "structural_tag", &p->structural_tag, err, errlen))
        goto fail;
    if (F("ignore_eos") && get_bool(F("ignore_eos"), "ignore_eos", &p->ignore_eos, err, errlen)) goto fail;
    if (F("skip_special_tokens") &&
        get_bool(F("skip_special_tokens"), "skip_special_tokens", &p->skip_special_tokens, err, errlen))
        goto fail;
    if (F("spaces_between_special_tokens") &&
        get_bool(F("spaces_between_special_tokens"), "spaces_between_special_tokens",
                 &p->spaces_between_special_tokens, err, errlen))
        goto fail;
    if (F("no_stop_trim") && get_bool(F("no_stop_trim"), "no_stop_trim", &p->no_stop_trim, err, errlen)) goto fail;
    json_t *cp = F("custom_params");
    if (cp && !json_is_null(cp)) {
        if (!json_is_object(cp)) {
            errmsg_set(err, errlen, "sampling_params.custom_params must be an object, got %s.", json_kind(cp));
            goto fail;
        }
        p->custom_params = json_dumps(cp, JSON_COMPACT | JSON_SORT_KEYS);
        if (!p->custom_params) {
            errmsg_set(err, errlen, "out of memory");
            goto fail;
        }
    }
    json_t *si = F("stream_interval");
    if (si && !json_is_null(si)) {
        if (get_int(si, "stream_interval", &p->stream_interval, err, errlen)) goto fail;
        p->has_stream_interval = true;
    }
    if (F("logit_bias") && get_logit_bias(F("logit_bias"), p, err, errlen)) goto fail;
    json_t *seed = F("sampling_seed");
    if (seed && !json_is_null(seed)) {
        int64_t s;
        if (get_int(seed, "sampling_seed", &s, err, errlen)) goto fail;
        p->has_sampling_seed = true;
        p->sampling_seed = (uint64_t)s;
    }
#undef F
    /* SGLang __post_init__: near-zero temperature means greedy. */
    if (p->temperature >= 0.0 && p->temperature < SAMPLING_EPS) {
        p->temperature = 1.0;
        p->given_as_int &= ~(unsigned)SP_INT_TEMPERATURE;
        p->top_k = 1;
    }
    if (p->top_k == -1) p->top_k = SAMPLING_TOP_K_ALL;
    return 0;
fail:
    sampling_params_free(p);
    return -1;
}

int sampling_params_parse(sampling_params *p, const char *text, size_t len, char *err, size_t errlen)
{
    json_error_t je;
    json_t *obj = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!obj) {
        sampling_params_init(p);
        errmsg_set(err, errlen, "invalid JSON in sampling_params: %s (line %d, column %d)", je.text, je.line,
                je.column);
        return -1;
    }
    int rc = sampling_params_from_json(p, obj, err, errlen);
    json_decref(obj);
    return rc;
}

int sampling_params_verify(const sampling_params *p, int64_t vocab_size, char *err, size_t errlen)
{
    char b[64];
    if (!isfinite(p->temperature) || p->temperature < 0.0) {
        errmsg_set(err, errlen, "temperature must be a non-negative finite number, got %s.",
                pyval(p, SP_INT_TEMPERATURE, p->temperature, b, sizeof b));
        return -1;
    }
    if (!(p->top_p > 0.0 && p->top_p <= 1.0)) {
        errmsg_set(err, errlen, "top_p must be in (0, 1], got %s.", pyval(p, SP_INT_TOP_P, p->top_p, b, sizeof b));
        return -1;
    }
    if (!(p->min_p >= 0.0 && p->min_p <= 1.0)) {
        errmsg_set(err, errlen, "min_p must be in [0, 1], got %s.", pyval(p, SP_INT_MIN_P, p->min_p, b, sizeof b));
        return -1;
    }
    if (p->top_k < 1 || p->top_k == -1) {
        errmsg_set(err, errlen, "top_k must be -1 (disable) or at least 1, got %lld.", (long long)p->top_k);
        return -1;
    }
    if (!(p->frequency_penalty >= -2.0 && p->frequency_penalty <= 2.0)) {
        errmsg_set(err, errlen, "frequency_penalty must be in [-2, 2], got %s.",
                pyval(p, SP_INT_FREQUENCY, p->frequency_penalty, b, sizeof b));
        return -1;
    }
    if (!(p->presence_penalty >= -2.0 && p->presence_penalty <= 2.0)) {
        errmsg_set(err, errlen, "presence_penalty must be in [-2, 2], got %s.",
                pyval(p, SP_INT_PRESENCE, p->presence_penalty, b, sizeof b));
        return -1;
    }
    if (!(p->repetition_penalty > 0.0 && p->repetition_penalty <= 2.0)) {
        errmsg_set(err, errlen, "repetition_penalty must be in (0, 2] (1.0 = no penalty), got %s.",
                pyval(p, SP_INT_REPETITION, p->repetition_penalty, b, sizeof b));
        return -1;
    }
    if (!(0 <= p->min_new_tokens)) {
        errmsg_set(err, errlen, "min_new_tokens must be in [0, max_new_tokens], got %lld.", (long long)p->min_new_tokens);
        return -1;
    }
    if (p->has_max_new_tokens) {
        if (p->max_new_tokens < 0) {
            errmsg_set(err, errlen, "max_new_tokens must be at least 0, got %lld.", (long long)p->max_new_tokens);
            return -1;
        }
        if (!(p->min_new_tokens <= p->max_new_tokens)) {
            errmsg_set(err, errlen, "min_new_tokens must be in [0, max_new_tokens(%lld)], got %lld.",
                    (long long)p->max_new_tokens, (long long)p->min_new_tokens);
            return -1;
        }
    }
    for (int i = 0; i < p->n_logit_bias; i++) {
        if (p->logit_bias[i].token < 0 || p->logit_bias[i].token >= vocab_size) {
            errmsg_set(err, errlen, "logit_bias must has keys in [0, %lld], got %d.", (long long)(vocab_size - 1),
                    p->logit_bias[i].token);
            return -1;
        }
    }
    int grammars = (p->json_schema != NULL) + (p->regex != NULL) + (p->ebnf != NULL);
    if (grammars > 1) {
        errmsg_set(err, errlen, "Only one of regex, json_schema, or ebnf can be set.");
        return -1;
    }
    if (grammars && p->structural_tag) { /* SGLang would silently prefer the other one */
        errmsg_set(err, errlen, "Only one of regex, json_schema, ebnf, or structural_tag can be set.");
        return -1;
    }
    return 0;
}

const char *sampling_params_grammar(const sampling_params *p, const char **name)
{
    const char *n = p->json_schema ? "json_schema" : p->regex ? "regex" : p->ebnf ? "ebnf"
                    : p->structural_tag                       ? "structural_tag"
                                                              : NULL;
    if (name) *name = n;
    return p->json_schema ? p->json_schema : p->regex ? p->regex : p->ebnf ? p->ebnf : p->structural_tag;
}

int sampling_params_check_supported(const sampling_params *p, char *err, size_t errlen)
{
    if (p->n < 1) {
        errmsg_set(err, errlen, "n must be at least 1, got %lld.", (long long)p->n);
        return -1;
    }
    if (p->has_stream_interval && p->stream_interval < 1) {
        errmsg_set(err, errlen, "stream_interval must be at least 1, got %lld.", (long long)p->stream_interval);
        return -1;
    }
    return 0;
}
