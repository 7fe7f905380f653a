/* fileio — read a whole file into memory.
 *
 * DESIGN: one routine for every loader that reads a small-to-medium file
 * (config.json, a safetensors index, tokenizer.json, a chat template):
 * regular files only, an optional size cap, the result NUL-terminated so
 * text parsers can run on it directly. */
#ifndef SGLC_UTIL_FILEIO_H
#define SGLC_UTIL_FILEIO_H

#include <stddef.h>

/* Read the regular file `path` whole.  max: largest size accepted in bytes
 * (0 = no cap).  Returns a malloc'd buffer of *len bytes plus a NUL (the
 * caller frees it; len may be NULL), or NULL with errno set: fopen's
 * errors (ENOENT, EACCES, ...), EISDIR for something that is not a regular
 * file, EFBIG when the file is larger than max, ENOMEM, EIO. */
char *fileio_read(const char *path, size_t max, size_t *len);

#endif
