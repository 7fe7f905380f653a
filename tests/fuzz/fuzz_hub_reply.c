/* fuzz_hub_reply — what a (hostile) hub server sends: the model-info JSON
 * (sha + siblings, each name through the file filter) and HEAD header
 * lines.  Must never crash, leak, or accept a name with a path in it. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hub/hub.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char commit[64];
    json_t *sib = NULL;
    if (hub_parse_model_info((const char *)data, size, commit, sizeof commit, &sib) == HUB_OK) {
        if (strlen(commit) != 40) abort();
        size_t i;
        json_t *s;
        json_array_foreach(sib, i, s) {
            const char *f = json_string_value(json_object_get(s, "rfilename"));
            if (f && hub_file_wanted(f, false) && (strchr(f, '/') || f[0] == '.')) abort();
        }
        json_decref(sib);
    }
    /* the same bytes as header lines */
    hub_head_info hi;
    hub_head_info_reset(&hi);
    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p + 1) : (size_t)(end - p);
        hub_parse_header_line(&hi, p, n);
        p += n;
    }
    if (memchr(hi.etag, 0, sizeof hi.etag) == NULL || memchr(hi.linked_etag, 0, sizeof hi.linked_etag) == NULL)
        abort();
    return 0;
}
