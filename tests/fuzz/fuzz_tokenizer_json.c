/* fuzz_tokenizer_json — tokenizer.json loading from arbitrary bytes.
 * Any input must either load (then encode + decode a fixed text without a
 * sanitizer report) or fail with an error message; never crash or leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    log_set_level(LOG_CRITICAL);
    char err[256] = "";
    tok_tokenizer *t = tok_load_json((const char *)data, size, NULL, NULL, NULL, NULL, err, sizeof err);
    if (!t) {
        if (!err[0]) abort(); /* a failure must say why */
        return 0;
    }
    static const char text[] = "Hello, world! 你好 <s> 12345 \xF0\x9F\x98\x80 a\xFF";
    tok_ids ids = {0};
    if (tok_encode(t, text, sizeof text - 1, true, &ids) == 0) {
        char *out = NULL;
        tok_decode_opts o = {.skip_special_tokens = true};
        if (tok_decode(t, ids.ids, ids.n, &o, &out, NULL) == 0) free(out);
    }
    tok_ids_free(&ids);
    tok_destroy(t);
    return 0;
}
