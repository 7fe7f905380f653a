/* errmsg — the "char *err, size_t errlen" convention of library calls.
 *
 * DESIGN: a failing library function writes one human-readable sentence
 * into the caller's buffer (which may be NULL/0: then nothing is written)
 * and returns a status code; this is the one formatter they share. */
#ifndef SGLC_UTIL_ERRMSG_H
#define SGLC_UTIL_ERRMSG_H

#include <stddef.h>

/* snprintf into err (if err && errlen); never fails. */
void errmsg_set(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
