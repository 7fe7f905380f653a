/* cli_model — see cli_model.h. */
#include "cli/cli_model.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli_gguf.h"
#include "hub/hub.h"
#include "kernels/kernels.h"
#include "model/gguf_model.h"
#include "util/cpu.h"
#include "util/log.h"

void cli_model_opts_init(cli_model_opts *o)
{
    memset(o, 0, sizeof *o);
    o->load.dtype = -1;
    o->load.load_format = MODEL_LOAD_AUTO;
    o->kv_dtype = -1;
}

static char g_model_dir[4096];

const char *cli_model_dir(void) { return g_model_dir; }

model *cli_model_load(const cli_model_opts *o)
{
    if (kernels_init(NULL)) {
        fprintf(stderr, "error: kernel selection failed (SGLC_KERNELS?)\n");
        return NULL;
    }
    log_info("kernels: %s", kernels_desc());
    /* the LM head is f32 math already (f32 hidden states, bf16 weights
     * widened exactly, f32 accumulation: what SGLang's fp32 lm_head does);
     * only the AVX-512 debug switch SGLC_BF16_DOT=1 rounds activations */
    const char *dot = getenv("SGLC_BF16_DOT");
    if (o->fp32_lm_head && kernels_isa() == KERN_ISA_AVX512 && dot && *dot && strcmp(dot, "0") != 0) {
        fprintf(stderr, "error: --enable-fp32-lm-head: SGLC_BF16_DOT=%s rounds the activations of every bf16 "
                        "matmul, the LM head included, to bf16; unset it\n", dot);
        return NULL;
    }
    kern_set_pack_threads(o->pack_threads > 0 ? o->pack_threads : 1);
    char err[1024];
    model_load_opts lo = o->load;
    char dir[4096];
    struct stat st;
    if (lo.model_path && stat(lo.model_path, &st) == 0 && S_ISREG(st.st_mode)) {
        /* a model file (GGUF): no hub resolution */
        snprintf(g_model_dir, sizeof g_model_dir, "%s", lo.model_path);
    } else if (lo.model_path) {
        hub_opts ho = {0};
        ho.revision = o->revision;
        ho.cache_dir = o->download_dir;
        ho.skip_weights = lo.load_format == MODEL_LOAD_DUMMY;
        if (hub_resolve(lo.model_path, &ho, dir, sizeof dir, err, sizeof err) != 0) {
            fprintf(stderr, "error: %s\n", err);
            return NULL;
        }
        lo.model_path = dir;
        snprintf(g_model_dir, sizeof g_model_dir, "%s", dir);
    }
    model *m = model_load(&lo, err, sizeof err);
    if (!m) fprintf(stderr, "error: %s\n", err);
    return m;
}

int cli_tokenizer_load(const char *dir, bool required, tok_tokenizer **out)
{
    *out = NULL;
    char gpath[4096], gerr[512];
    if (gguf_model_path(dir, 0, gpath, sizeof gpath, gerr, sizeof gerr) == 1)
        return cli_tokenizer_load_gguf(gpath, required, out);
    char tjson[4200], terr[512];
    snprintf(tjson, sizeof tjson, "%s/tokenizer.json", dir);
    if (!required && access(tjson, R_OK) != 0) return 0;
    tok_load_opts to = {0};
    *out = tok_load_dir(dir, &to, terr, sizeof terr);
    if (!*out) {
        fprintf(stderr, "error: tokenizer: %s\n", terr);
        return -1;
    }
    return 0;
}

dtype cli_kv_dtype(const cli_model_opts *o, const model *m)
{
    if (o->kv_dtype >= 0) return (dtype)o->kv_dtype;
    return model_weight_dtype(m) == DTYPE_BF16 ? DTYPE_BF16 : DTYPE_F32;
}

int cli_threads(const cli_model_opts *o)
{
    if (o->threads > 0) return o->threads;
    int n = cpu_get()->n_cores;
    return n > 0 ? n : 1;
}
