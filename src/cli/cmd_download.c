/* cmd_download — `sglc download MODEL_ID [--revision R] [--download-dir D]
 * [--no-weights]`: fetch a model from the Hugging Face hub into the cache
 * exactly as `sglc serve --model-path MODEL_ID` will, and print the local
 * snapshot folder on stdout.  HF_ENDPOINT, HF_TOKEN, HF_HOME, HF_HUB_CACHE
 * and HF_HUB_OFFLINE are honoured (see src/hub/hub.h). */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "hub/hub.h"

static void download_usage(FILE *f)
{
    fprintf(f, "usage: sglc download MODEL_ID [--revision REV] [--download-dir DIR] [--no-weights]\n\n"
               "Download a model (config, tokenizer, safetensors weights) from the Hugging Face hub\n"
               "into the hub cache and print its local snapshot folder.\n\n"
               "  --revision REV      branch, tag or commit (default: main)\n"
               "  --download-dir DIR  cache folder (default: $HF_HUB_CACHE, $HF_HOME/hub,\n"
               "                      ~/.cache/huggingface/hub)\n"
               "  --no-weights        skip *.safetensors (for --load-format dummy)\n\n"
               "Environment: HF_ENDPOINT, HF_TOKEN, HF_HOME, HF_HUB_CACHE, HF_HUB_OFFLINE=1.\n");
}

int cmd_download(int argc, char **argv)
{
    hub_opts o = {0};
    const char *model = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            download_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--revision") || !strcmp(a, "--download-dir")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "sglc download: error: %s expects a value\n", a);
                return 2;
            }
            if (!strcmp(a, "--revision")) o.revision = argv[++i];
            else o.cache_dir = argv[++i];
        } else if (!strcmp(a, "--no-weights")) {
            o.skip_weights = true;
        } else if (a[0] == '-') {
            fprintf(stderr, "sglc download: error: unrecognized argument '%s'\n", a);
            download_usage(stderr);
            return 2;
        } else if (model) {
            fprintf(stderr, "sglc download: error: unexpected argument '%s'\n", a);
            return 2;
        } else {
            model = a;
        }
    }
    if (!model) {
        download_usage(stderr);
        return 2;
    }
    char dir[PATH_MAX], err[1024];
    int rc = hub_resolve(model, &o, dir, sizeof dir, err, sizeof err);
    if (rc != HUB_OK) {
        fprintf(stderr, "sglc download: error: %s\n", err);
        return rc == HUB_EINVAL ? 2 : 1;
    }
    printf("%s\n", dir);
    return 0;
}
