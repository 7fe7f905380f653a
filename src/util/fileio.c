/* fileio — see fileio.h. */
#include "util/fileio.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

char *fileio_read(const char *path, size_t max, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    struct stat st;
    if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode)) {
        fclose(f);
        errno = EISDIR;
        return NULL;
    }
    /* the size from fstat is a hint: read until EOF, growing the buffer */
    size_t cap = (size_t)st.st_size + 1, n = 0;
    if (max && cap > max + 1) cap = max + 1;
    char *buf = malloc(cap + 1);
    if (!buf) {
        fclose(f);
        errno = ENOMEM;
        return NULL;
    }
    for (;;) {
        if (n == cap) {
            if (max && cap > max) break; /* read max + 1 bytes: too large */
            size_t nc = cap * 2;
            if (max && nc > max + 1) nc = max + 1;
            char *p = realloc(buf, nc + 1);
            if (!p) {
                free(buf);
                fclose(f);
                errno = ENOMEM;
                return NULL;
            }
            buf = p, cap = nc;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad || (max && n > max)) {
        free(buf);
        errno = bad ? EIO : EFBIG;
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}
