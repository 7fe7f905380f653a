/* strbuf — see strbuf.h. */
#include "util/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for n more bytes plus the NUL; false (and oom) if it cannot grow. */
static bool reserve(strbuf *b, size_t n)
{
    if (b->oom) return false;
    if (b->len + n + 1 <= b->cap) return true;
    size_t nc = b->cap ? b->cap * 2 : 256;
    while (nc < b->len + n + 1) nc *= 2;
    char *g = realloc(b->p, nc);
    if (!g) {
        b->oom = true;
        return false;
    }
    b->p = g;
    b->cap = nc;
    return true;
}

void strbuf_put(strbuf *b, const char *s, size_t n)
{
    if (!reserve(b, n)) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void strbuf_puts(strbuf *b, const char *s) { strbuf_put(b, s, strlen(s)); }

void strbuf_printf(strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[256];
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = true;
    } else if ((size_t)n < sizeof tmp) {
        strbuf_put(b, tmp, (size_t)n);
    } else if (reserve(b, (size_t)n)) {
        vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap2);
        b->len += (size_t)n;
    }
    va_end(ap2);
}

char *strbuf_take(strbuf *b)
{
    if (!b->oom && !b->p) strbuf_put(b, "", 0);
    char *p = b->p;
    if (b->oom) {
        free(p);
        p = NULL;
    }
    b->p = NULL;
    b->len = b->cap = 0;
    return p;
}
