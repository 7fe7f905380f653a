/* strbuf — a growing NUL-terminated string for building text answers and
 * log lines (request log, /metrics).
 *
 * DESIGN: appends never fail loudly: an allocation failure sets `oom`,
 * later appends do nothing, and strbuf_take reports it by returning NULL,
 * so a caller checks once at the end. */
#ifndef SGLC_UTIL_STRBUF_H
#define SGLC_UTIL_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct strbuf {
    char *p;    /* (cap) owned; p[len] == 0 once anything was appended */
    size_t len, cap;
    bool oom;
} strbuf;       /* zero-initialize: strbuf b = {0}; */

void strbuf_put(strbuf *b, const char *s, size_t n);
void strbuf_puts(strbuf *b, const char *s);
void strbuf_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The string (caller frees; "" when nothing was appended), or NULL after
 * an allocation failure (the buffer is freed either way). */
char *strbuf_take(strbuf *b);

#endif
