/* api_output — see api_output.h. */
#include "api/api_output.h"

#include <stdlib.h>
#include <string.h>

#include "util/log.h"

/* ---- pieces ---------------------------------------------------------------- */

int api_pieces_add(api_pieces *ps, api_piece_kind kind, const char *text, size_t len, int index)
{
    if (ps->n == ps->cap) {
        int nc = ps->cap ? ps->cap * 2 : 4;
        api_piece *g = realloc(ps->v, sizeof *g * (size_t)nc);
        if (!g) return -1;
        ps->v = g;
        ps->cap = nc;
    }
    char *t = malloc(len + 1);
    if (!t) return -1;
    if (len) memcpy(t, text, len);
    t[len] = 0;
    ps->v[ps->n++] = (api_piece){.kind = kind, .text = t, .len = len, .index = index};
    return 0;
}

char *api_pieces_join(const api_pieces *ps, api_piece_kind kind)
{
    size_t n = 0;
    for (int i = 0; i < ps->n; i++)
        if (ps->v[i].kind == kind) n += ps->v[i].len;
    char *s = malloc(n + 1), *w = s;
    if (!s) return NULL;
    for (int i = 0; i < ps->n; i++)
        if (ps->v[i].kind == kind) {
            memcpy(w, ps->v[i].text, ps->v[i].len);
            w += ps->v[i].len;
        }
    *w = 0;
    return s;
}

void api_pieces_free(api_pieces *ps)
{
    for (int i = 0; i < ps->n; i++) free(ps->v[i].text);
    free(ps->v);
    memset(ps, 0, sizeof *ps);
}

/* ---- the stage --------------------------------------------------------------- */

void api_output_init(api_output *o, const tok_tokenizer *tok)
{
    memset(o, 0, sizeof *o);
    o->tok = tok;
}

void api_output_free(api_output *o)
{
    if (o->ts) tok_stream_destroy(o->ts);
    free(o->pend);
    free(o->tail);
    free(o->text);
    for (int i = 0; i < o->n_parsers; i++)
        if (o->parsers[i]->destroy) o->parsers[i]->destroy(o->parsers[i]);
    memset(o, 0, sizeof *o);
}

/* Append n bytes to a growing NUL-terminated buffer.  0 or -1. */
static int buf_put(char **b, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t nc = *cap ? *cap : 64;
        while (nc < *len + n + 1) nc *= 2;
        char *g = realloc(*b, nc);
        if (!g) return -1;
        *b = g;
        *cap = nc;
    }
    if (n) memcpy(*b + *len, s, n);
    *len += n;
    (*b)[*len] = 0;
    return 0;
}

/* Bytes of decoded text a new stop-string match can start in before the
 * newest text: the longest stop string's length - 1. */
static size_t stop_keep(const sampling_params *p)
{
    size_t m = 0;
    for (int i = 0; i < p->n_stop; i++) {
        size_t l = strlen(p->stop[i]);
        if (l > m) m = l;
    }
    return m ? m - 1 : 0;
}

/* Scheduler thread: feed out[n_decoded, upto) to the stream, append the
 * new text to pend and keep the tail for the stop-string search.  With
 * search != NULL, *search (malloc'd) is the text a new match can be in:
 * the tail before + the new text + the text held back.  0 or -1. */
static int decode_to(api_output *o, const sampling_params *p, const int32_t *out, int64_t upto, char **search,
                     size_t *search_len)
{
    if (search) *search = NULL;
    if (!o->ts) {
        tok_decode_opts opts = {.skip_special_tokens = p->skip_special_tokens,
                                .spaces_between_special_tokens = p->spaces_between_special_tokens};
        if (!(o->ts = tok_stream_create(o->tok, &opts))) return -1;
    }
    char *d = NULL, *held = NULL;
    size_t dl = 0, hl = 0;
    if (upto > o->n_decoded) {
        if (tok_stream_push_held(o->ts, out + o->n_decoded, (size_t)(upto - o->n_decoded), &d, &dl,
                                 search ? &held : NULL, &hl))
            return -1;
        o->n_decoded = upto;
    }
    int rc = 0;
    if (search) {
        size_t sl = 0, sc = 0;
        rc |= buf_put(search, &sl, &sc, o->tail ? o->tail : "", o->tail_len);
        rc |= buf_put(search, &sl, &sc, d ? d : "", dl);
        rc |= buf_put(search, &sl, &sc, held ? held : "", hl);
        if (search_len) *search_len = sl;
    }
    rc |= buf_put(&o->pend, &o->pend_len, &o->pend_cap, d ? d : "", dl);
    size_t keep = stop_keep(p);
    if (!rc && keep) { /* tail = the last `keep` bytes of tail + d */
        size_t tl = o->tail_len + dl, from = tl > keep ? tl - keep : 0;
        char *t = malloc(tl - from + 1);
        if (t) {
            for (size_t i = from; i < tl; i++) t[i - from] = i < o->tail_len ? o->tail[i] : d[i - o->tail_len];
            t[tl - from] = 0;
            free(o->tail);
            o->tail = t;
            o->tail_len = tl - from;
        } else {
            rc = -1;
        }
    }
    free(d);
    free(held);
    if (rc && search) free(*search), *search = NULL;
    return rc ? -1 : 0;
}

static int hook_check(void *ctx, void *req_ctx, uint64_t id, int index, const sampling_params *p, const int32_t *out,
                      int64_t n_out)
{
    (void)ctx, (void)id;
    if (!req_ctx) return -1;
    api_output *o = (api_output *)req_ctx + index;
    if (!o->tok || p->n_stop <= 0 || n_out <= 0) return -1;
    char *txt = NULL;
    if (decode_to(o, p, out, n_out, &txt, NULL)) {
        log_warn("output stage: cannot decode the output (stop strings not checked)");
        return -1;
    }
    int hit = -1;
    for (int i = 0; i < p->n_stop && hit < 0; i++)
        if (p->stop[i][0] && strstr(txt, p->stop[i])) hit = i;
    free(txt);
    return hit;
}

static char *hook_text(void *ctx, void *req_ctx, int index, const sampling_params *p, const int32_t *out,
                       int64_t n_out, sched_finish_kind finish, size_t *text_len)
{
    (void)ctx;
    *text_len = 0;
    if (!req_ctx) return NULL;
    api_output *o = (api_output *)req_ctx + index;
    if (!o->tok || o->flushed) return NULL;
    /* SGLang's trim_matched_stop: a matched stop token is not text */
    int64_t upto = finish == SCHED_FINISH_STOP_TOKEN && !p->no_stop_trim && n_out > 0 ? n_out - 1 : n_out;
    int rc = decode_to(o, p, out, upto, NULL, NULL);
    if (!rc && finish != SCHED_FINISH_NONE) {
        char *rest = NULL;
        size_t rl = 0;
        rc = tok_stream_finish(o->ts, &rest, &rl);
        if (!rc) rc = buf_put(&o->pend, &o->pend_len, &o->pend_cap, rest, rl);
        free(rest);
        o->flushed = true;
    }
    if (rc) log_warn("output stage: cannot decode the output (text dropped)");
    if (rc || !o->pend_len) return NULL;
    char *t = o->pend;
    *text_len = o->pend_len;
    o->pend = NULL;
    o->pend_len = o->pend_cap = 0;
    return t;
}

const sched_output_hook api_output_hook = {.check = hook_check, .text = hook_text};

/* ---- dispatcher ---------------------------------------------------------------- */

int api_output_add(api_output *o, const char *text, size_t len)
{
    if (!text || !len) return 0;
    return buf_put(&o->text, &o->len, &o->cap, text, len);
}

char *api_output_final(const api_output *o, sched_finish_kind finish, const char *stop_str, bool no_stop_trim)
{
    size_t n = o->len;
    if (!no_stop_trim && finish == SCHED_FINISH_STOP_STR && stop_str && o->text) {
        const char *p = strstr(o->text, stop_str);
        if (p) n = (size_t)(p - o->text);
    }
    char *t = malloc(n + 1);
    if (!t) return NULL;
    if (n) memcpy(t, o->text, n);
    t[n] = 0;
    return t;
}

int api_output_add_parser(api_output *o, api_output_parser *p)
{
    if (o->n_parsers >= API_OUTPUT_MAX_PARSERS) {
        if (p->destroy) p->destroy(p);
        return -1;
    }
    o->parsers[o->n_parsers++] = p;
    return 0;
}

int api_output_parse(api_output *o, const char *delta, size_t len, bool final, api_pieces *out)
{
    if (o->n_parsers == 0) return len ? api_pieces_add(out, API_PIECE_CONTENT, delta, len, 0) : 0;
    api_pieces cur = {0};
    int rc = api_pieces_add(&cur, API_PIECE_CONTENT, delta, len, 0);
    for (int k = 0; !rc && k < o->n_parsers; k++) {
        /* pieces an earlier parser made pass through; its content is fed on */
        api_pieces next = {0};
        for (int i = 0; !rc && i < cur.n; i++)
            if (cur.v[i].kind != API_PIECE_CONTENT)
                rc = api_pieces_add(&next, cur.v[i].kind, cur.v[i].text, cur.v[i].len, cur.v[i].index);
        char *content = rc ? NULL : api_pieces_join(&cur, API_PIECE_CONTENT);
        if (!rc && !content) rc = -1;
        if (!rc && (strlen(content) || final))
            rc = o->parsers[k]->feed(o->parsers[k], content, strlen(content), final, &next);
        free(content);
        api_pieces_free(&cur);
        cur = next;
    }
    for (int i = 0; !rc && i < cur.n; i++)
        rc = api_pieces_add(out, cur.v[i].kind, cur.v[i].text, cur.v[i].len, cur.v[i].index);
    api_pieces_free(&cur);
    return rc ? -1 : 0;
}
