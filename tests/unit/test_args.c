/* test_args — the server-argument table: defaults, each kind, choices,
 * flags, lists, support statuses, --config YAML with command-line
 * override, error messages, help and the JSON dump. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "args/args.h"
#include "util/log.h"

/* Parse a NULL-terminated list of tokens (argv[0] = "test"). */
static int parse_v(args_server *a, const args_extra *extra, char *err, size_t errlen, ...)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = "test";
    va_list ap;
    va_start(ap, errlen);
    char *s;
    while ((s = va_arg(ap, char *)) && argc < 63) argv[argc++] = s;
    va_end(ap);
    argv[argc] = NULL;
    return args_parse(a, argc, argv, extra, err, errlen);
}
#define PARSE(a, err, ...) parse_v(a, NULL, err, sizeof err, __VA_ARGS__, (char *)NULL)

static void test_defaults(void **state)
{
    (void)state;
    args_server a;
    char err[256];
    assert_int_equal(parse_v(&a, NULL, err, sizeof err, (char *)NULL), ARGS_OK);
    assert_null(a.model_path);
    assert_string_equal(a.host, "127.0.0.1");
    assert_int_equal(a.port, 30000);
    assert_int_equal(a.max_prefill_tokens, 16384);
    assert_int_equal(a.context_length, ARGS_INT_NONE);
    assert_true(args_float_is_none(a.mem_fraction_static));
    assert_true(a.schedule_conservativeness == 1.0);
    assert_false(a.disable_radix_cache);
    assert_string_equal(a.dtype, "auto");
    assert_string_equal(a.schedule_policy, "fcfs");
    assert_string_equal(a.json_model_override_args, "{}");
    assert_string_equal(a.disaggregation_mode, "null");
    assert_int_equal(a.offload_group_size, -1);
    assert_non_null(a.encoder_urls);
    assert_int_equal(json_array_size(a.encoder_urls), 0);
    assert_null(a.cuda_graph_bs);
    assert_false(args_is_explicit(&a, ARG_ID_port));
    args_server_free(&a);
}

/* Every row: default converts (init succeeds), flags start with "--",
 * field names unique, flags unique across the table, help non-empty,
 * choice defaults are among their choices. */
static void test_table_consistent(void **state)
{
    (void)state;
    for (int i = 0; i < ARG_COUNT; i++) {
        const args_spec *sp = &args_specs[i];
        assert_true(!strncmp(sp->flags, "--", 2));
        assert_true(strlen(sp->help) > 5);
        assert_ptr_equal(args_find(sp->field), sp);
        for (int j = i + 1; j < ARG_COUNT; j++) assert_string_not_equal(sp->field, args_specs[j].field);
        if (sp->kind == ARGS_KIND_CHOICE) assert_non_null(sp->choices);
        /* every alias resolves to this row */
        char buf[256];
        snprintf(buf, sizeof buf, "%s", sp->flags);
        for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) assert_ptr_equal(args_find(tok), sp);
    }
    args_server a;
    assert_int_equal(args_server_init(&a), ARGS_OK);
    args_server_free(&a);
}

static void test_each_kind(void **state)
{
    (void)state;
    args_server a;
    char err[256];
    int rc = PARSE(&a, err, "--model-path", "/m", "--port=8080", "--mem-fraction-static", "0.5",
                   "--disable-radix-cache", "--dtype", "bfloat16", "--json-model-override-args",
                   "{\"rope_theta\": 1e6}", "--context-length", "4096", "--random-seed", "-7",
                   "--chunked-prefill-size", "-1");
    assert_int_equal(rc, ARGS_OK);
    assert_string_equal(a.model_path, "/m");
    assert_int_equal(a.port, 8080);
    assert_true(a.mem_fraction_static == 0.5);
    assert_true(a.disable_radix_cache);
    assert_string_equal(a.dtype, "bfloat16");
    assert_string_equal(a.json_model_override_args, "{\"rope_theta\": 1e6}");
    assert_int_equal(a.context_length, 4096);
    assert_int_equal(a.random_seed, -7);
    assert_int_equal(a.chunked_prefill_size, -1);
    assert_true(args_is_explicit(&a, ARG_ID_port));
    assert_int_equal(a.source[ARG_ID_port], ARGS_SRC_CLI);
    args_server_free(&a);

    /* alias spelling */
    assert_int_equal(PARSE(&a, err, "--model", "org/name"), ARGS_OK);
    assert_string_equal(a.model_path, "org/name");
    args_server_free(&a);
}

static void test_lists(void **state)
{
    (void)state;
    args_server a;
    char err[256];
    assert_int_equal(args_server_init(&a), ARGS_OK);
    const char *v[] = {"1", "2", "4"};
    /* NOT_YET list with a non-default value is refused... */
    assert_int_equal(args_set(&a, "--debug-tensor-dump-layers", v, 3, ARGS_SRC_CLI, err, sizeof err), ARGS_EUSAGE);
    assert_string_equal(err, "--debug-tensor-dump-layers is not supported by sglc yet");
    /* ...an empty list equal to the default [] is accepted */
    assert_int_equal(args_set(&a, "encoder_urls", NULL, 0, ARGS_SRC_CONFIG, err, sizeof err), ARGS_OK);
    args_server_free(&a);

    /* the CLI collects items up to the next option */
    int rc = PARSE(&a, err, "--encoder-urls", "--port", "1");
    assert_int_equal(rc, ARGS_EUSAGE);
    assert_string_equal(err, "--encoder-urls expects at least one value");
    args_server_free(&a);
}

static void test_choices_and_bad_values(void **state)
{
    (void)state;
    args_server a;
    char err[256];
    struct {
        const char *k, *v, *msg;
    } cases[] = {
        {"--dtype", "int8", "--dtype: invalid choice 'int8' (choose from {auto,float32,float16,bfloat16})"},
        {"--port", "80x", "--port: invalid int value '80x'"},
        {"--port", "99999999999", "--port: invalid int value '99999999999'"},
        {"--port", "-2147483648", "--port: invalid int value '-2147483648'"},
        {"--port", "0", "--port must be in 1..65535, got 0"},
        {"--mem-fraction-static", "abc", "--mem-fraction-static: invalid float value 'abc'"},
        {"--mem-fraction-static", "nan", "--mem-fraction-static: invalid float value 'nan'"},
        {"--mem-fraction-static", "0", "--mem-fraction-static must be in (0, 1], got 0"},
        {"--page-size", "0", "--page-size must be at least 1, got 0"},
        {"--chunked-prefill-size", "0", "--chunked-prefill-size must be -1 (off) or at least 1, got 0"},
        {"--load-format", "pt", "--load-format: invalid choice 'pt' (choose from {auto,safetensors,dummy,gguf})"},
        {"--json-model-override-args", "{x", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(PARSE(&a, err, cases[i].k, cases[i].v), ARGS_EUSAGE);
        if (cases[i].msg)
            assert_string_equal(err, cases[i].msg);
        else
            assert_non_null(strstr(err, "invalid JSON"));
        args_server_free(&a);
    }
    assert_int_equal(PARSE(&a, err, "--schedule-policy", "lpm", "--kv-cache-dtype", "bfloat16"), ARGS_OK);
    assert_string_equal(a.schedule_policy, "lpm");
    assert_string_equal(a.kv_cache_dtype, "bfloat16");
    args_server_free(&a);
}

static void test_cli_errors(void **state)
{
    (void)state;
    args_server a;
    char err[256];
    assert_int_equal(PARSE(&a, err, "--model-pth", "x"), ARGS_EUSAGE);
    assert_string_equal(err, "unrecognized argument '--model-pth'; did you mean '--model-path'?");
    args_server_free(&a);
    assert_int_equal(PARSE(&a, err, "--zzzzzzzz"), ARGS_EUSAGE);
    assert_string_equal(err, "unrecognized argument '--zzzzzzzz'");
    args_server_free(&a);
    assert_int_equal(PARSE(&a, err, "stray"), ARGS_EUSAGE);
    assert_string_equal(err, "unexpected argument 'stray' (options start with --)");
    args_server_free(&a);
    assert_int_equal(PARSE(&a, err, "--port"), ARGS_EUSAGE);
    assert_string_equal(err, "--port expects a value");
    args_server_free(&a);
    assert_int_equal(PARSE(&a, err, "--disable-radix-cache=1"), ARGS_EUSAGE);
    assert_string_equal(err, "--disable-radix-cache takes no value");
    args_server_free(&a);
    /* underscores are not a command-line spelling */
    assert_int_equal(PARSE(&a, err, "--context_length", "5"), ARGS_EUSAGE);
    args_server_free(&a);
    assert_int_equal(PARSE(&a, err, "--port", "1", "--help"), ARGS_HELP);
    args_server_free(&a);
}

static void test_not_yet_and_ignored(void **state)
{
    (void)state;
    args_server a;
    char err[256];
    assert_int_equal(PARSE(&a, err, "--attn-cp-size", "2"), ARGS_EUSAGE);
    assert_string_equal(err, "--attn-cp-size is not supported by sglc yet");
    args_server_free(&a);
    assert_int_equal(PARSE(&a, err, "--attention-context-parallel-size", "4"), ARGS_EUSAGE);
    assert_string_equal(err, "--attention-context-parallel-size is not supported by sglc yet");
    args_server_free(&a);
    assert_int_equal(PARSE(&a, err, "--enable-multimodal"), ARGS_EUSAGE);
    assert_string_equal(err, "--enable-multimodal is not supported by sglc yet");
    args_server_free(&a);
    /* the default value asks for what sglc does anyway */
    assert_int_equal(PARSE(&a, err, "--tp-size", "1", "--dp-size", "01", "--radix-eviction-policy", "lru"),
                     ARGS_OK);
    assert_int_equal(a.tp_size, 1);
    args_server_free(&a);
    /* every NOT_YET bool flag is refused */
    for (int i = 0; i < ARG_COUNT; i++) {
        const args_spec *sp = &args_specs[i];
        if (sp->status != ARGS_STATUS_NOT_YET || sp->kind != ARGS_KIND_BOOL) continue;
        char flag[128];
        snprintf(flag, sizeof flag, "%.*s", (int)strcspn(sp->flags, " "), sp->flags);
        assert_int_equal(PARSE(&a, err, flag), ARGS_EUSAGE);
        assert_non_null(strstr(err, "is not supported by sglc yet"));
        args_server_free(&a);
    }
    int saved = log_level_current;
    log_set_level(LOG_ERROR);
    assert_int_equal(PARSE(&a, err, "--trust-remote-code", "--nccl-port", "1234", "--device", "cpu"),
                     ARGS_OK);
    log_set_level(saved);
    assert_true(a.trust_remote_code);
    assert_int_equal(a.nccl_port, 1234);
    assert_string_equal(a.device, "cpu");
    args_server_free(&a);
    assert_int_equal(PARSE(&a, err, "--device", "cuda"), ARGS_EUSAGE);
    args_server_free(&a);
}

/* argparse's allow_abbrev=True: unique prefixes, exact matches first,
 * "=value" on a prefix, ambiguity with every candidate in parser order
 * (server flags, then the command's own options), values that look like
 * negative numbers or hold a space, "--". */
static void test_abbreviations(void **state)
{
    (void)state;
    args_server a;
    char err[ARGS_ERR_MAX];
    assert_int_equal(PARSE(&a, err, "--mem-frac", "0.8", "--chunk=512", "--max-t", "64", "--disable-r"), ARGS_OK);
    assert_true(a.mem_fraction_static == 0.8);
    assert_int_equal(a.chunked_prefill_size, 512);
    assert_int_equal(a.max_total_tokens, 64);
    assert_true(a.disable_radix_cache);
    args_server_free(&a);
    /* SGLang's docs write --tp */
    assert_int_equal(PARSE(&a, err, "--tp", "2"), ARGS_OK);
    assert_int_equal(a.tp_size, 2);
    args_server_free(&a);
    /* a refusal names the whole option argparse matched */
    assert_int_equal(PARSE(&a, err, "--attn-cp", "2"), ARGS_EUSAGE);
    assert_string_equal(err, "--attn-cp-size is not supported by sglc yet");
    args_server_free(&a);
    assert_int_equal(PARSE(&a, err, "--attention-context", "2"), ARGS_EUSAGE);
    assert_string_equal(err, "--attention-context-parallel-size is not supported by sglc yet");
    args_server_free(&a);
    /* exact spellings win over the options they are a prefix of */
    assert_int_equal(PARSE(&a, err, "--model", "/m", "--ep", "1"), ARGS_OK);
    assert_string_equal(a.model_path, "/m");
    args_server_free(&a);
    /* --enable-metrics is also a prefix of --enable-metrics-for-all-schedulers */
    assert_int_equal(PARSE(&a, err, "--enable-metrics"), ARGS_OK);
    assert_true(a.enable_metrics);
    assert_false(a.enable_metrics_for_all_schedulers);
    args_server_free(&a);
    /* ambiguity: argparse's words, candidates in table order, the token as typed */
    assert_int_equal(PARSE(&a, err, "--enable-lo"), ARGS_EUSAGE);
    assert_string_equal(err, "ambiguous option: --enable-lo could match --enable-lora, --enable-lora-overlap-loading");
    args_server_free(&a);
    assert_int_equal(PARSE(&a, err, "--tokenizer=x"), ARGS_EUSAGE);
    assert_string_equal(err, "ambiguous option: --tokenizer=x could match --tokenizer-path, --tokenizer-mode, "
                             "--tokenizer-worker-num, --tokenizer-metrics-custom-labels-header, "
                             "--tokenizer-metrics-allowed-custom-labels");
    args_server_free(&a);
    /* --h: --help comes first, as argparse adds it first */
    assert_int_equal(PARSE(&a, err, "--h"), ARGS_EUSAGE);
    assert_true(!strncmp(err, "ambiguous option: --h could match --help, --host, ", 50));
    args_server_free(&a);
    assert_int_equal(PARSE(&a, err, "--he"), ARGS_HELP);
    args_server_free(&a);
    assert_int_equal(PARSE(&a, err, "-hh"), ARGS_HELP);
    args_server_free(&a);
    assert_int_equal(PARSE(&a, err, "-hx"), ARGS_EUSAGE);
    assert_string_equal(err, "argument -h/--help: ignored explicit argument 'x'");
    args_server_free(&a);
    /* an ambiguous token before -h is an error; after it, the help */
    assert_int_equal(PARSE(&a, err, "--enable-lo", "-h"), ARGS_EUSAGE);
    args_server_free(&a);
    assert_int_equal(PARSE(&a, err, "-h", "--enable-lo"), ARGS_HELP);
    args_server_free(&a);
    /* values: negative numbers and texts with a space; an option is none */
    assert_int_equal(PARSE(&a, err, "--chunked-prefill-size", "-1", "--chat-template", "--x y"), ARGS_OK);
    assert_int_equal(a.chunked_prefill_size, -1);
    assert_string_equal(a.chat_template, "--x y");
    args_server_free(&a);
    assert_int_equal(PARSE(&a, err, "--host", "-x"), ARGS_EUSAGE);
    assert_string_equal(err, "--host expects a value");
    args_server_free(&a);
    assert_int_equal(PARSE(&a, err, "--port", "5", "--", "x"), ARGS_EUSAGE);
    assert_string_equal(err, "unrecognized arguments: -- x");
    args_server_free(&a);
    /* no prefix of anything: the did-you-mean message */
    assert_int_equal(PARSE(&a, err, "--max-totl-tokens", "5"), ARGS_EUSAGE);
    assert_string_equal(err, "unrecognized argument '--max-totl-tokens'; did you mean '--max-total-tokens'?");
    args_server_free(&a);

    /* the command's own options are in the same parser, after the server flags */
    const char *tmpl = NULL;
    bool compact = false;
    args_extra extra[] = {
        {.name = "--compact", .help = "One line.", .flag = &compact},
        {.name = "--template-file", .metavar = "F", .help = "A file.", .value = &tmpl},
        {0},
    };
    assert_int_equal(parse_v(&a, extra, err, sizeof err, "--comp", (char *)NULL), ARGS_EUSAGE);
    assert_string_equal(err, "ambiguous option: --comp could match --completion-template, --compact");
    args_server_free(&a);
    assert_int_equal(parse_v(&a, extra, err, sizeof err, "--compa", "--templ", "t.txt", (char *)NULL), ARGS_OK);
    assert_true(compact);
    assert_string_equal(tmpl, "t.txt");
    args_server_free(&a);
    /* a command without server arguments: only its own options */
    const args_cmd solo = {.extra = extra, .no_server_args = true};
    char *argv[] = {"t", "--comp", NULL};
    assert_int_equal(args_parse_cmd(&a, &solo, 2, argv, err, sizeof err), ARGS_OK);
    args_server_free(&a);
}

/* GPU-only tuning flags: accepted, IGNORED, each saying why in --help. */
static void test_gpu_flags_ignored(void **state)
{
    (void)state;
    args_server a;
    char err[ARGS_ERR_MAX];
    int saved = log_level_current;
    log_set_level(LOG_ERROR);
    int rc = PARSE(&a, err, "--cuda-graph-max-bs", "8", "--cuda-graph-bs", "1", "2", "--disable-cuda-graph",
                   "--disable-cuda-graph-padding", "--enable-torch-compile", "--torch-compile-max-bs", "4",
                   "--attention-backend", "triton", "--enable-nccl-nvls", "--sampling-backend", "flashinfer",
                   "--triton-attention-num-kv-splits", "16", "--disable-custom-all-reduce", "--disable-overlap-schedule",
                   "--device", "cpu");
    log_set_level(saved);
    assert_int_equal(rc, ARGS_OK);
    assert_int_equal(a.cuda_graph_max_bs, 8);
    assert_string_equal(a.attention_backend, "triton");
    assert_true(a.disable_overlap_schedule);
    args_server_free(&a);
    /* the choices stay checked as SGLang checks them */
    assert_int_equal(PARSE(&a, err, "--attention-backend", "warp-drive"), ARGS_EUSAGE);
    assert_non_null(strstr(err, "--attention-backend: invalid choice 'warp-drive'"));
    args_server_free(&a);
    for (int i = 0; i < ARG_COUNT; i++)
        if (args_specs[i].status == ARGS_STATUS_IGNORED) assert_non_null(strstr(args_specs[i].help, "(no effect"));
    assert_int_equal(args_specs[ARG_ID_enable_torch_compile].status, ARGS_STATUS_IGNORED);
    assert_int_equal(args_specs[ARG_ID_disable_overlap_schedule].status, ARGS_STATUS_SUPPORTED);
    /* a feature sglc lacks stays refused */
    assert_int_equal(PARSE(&a, err, "--enable-dp-attention"), ARGS_EUSAGE);
    assert_string_equal(err, "--enable-dp-attention is not supported by sglc yet");
    args_server_free(&a);
    const char *devs[] = {"cuda", "npu", "xpu", "hpu"};
    for (size_t k = 0; k < 4; k++) {
        assert_int_equal(PARSE(&a, err, "--device", devs[k]), ARGS_EUSAGE);
        char want[160];
        snprintf(want, sizeof want, "--device %s: this build of sglc serves CPUs only", devs[k]);
        assert_true(!strncmp(err, want, strlen(want)));
        args_server_free(&a);
    }
}

static void test_extra_options(void **state)
{
    (void)state;
    const char *prompt = NULL;
    bool verbose = false;
    args_extra extra[] = {
        {.name = "--prompt", .metavar = "TEXT", .help = "The prompt.", .value = &prompt},
        {.name = "--verbose", .help = "Talk.", .flag = &verbose},
        {0},
    };
    args_server a;
    char err[256];
    /* as argparse: "--help" is an option, not a value ("--prompt=--help" is one) */
    int rc = parse_v(&a, extra, err, sizeof err, "--prompt", "--help", (char *)NULL);
    assert_int_equal(rc, ARGS_EUSAGE);
    assert_string_equal(err, "--prompt expects a value");
    args_server_free(&a);
    rc = parse_v(&a, extra, err, sizeof err, "--prompt=--help", "--verbose", "--port", "9", (char *)NULL);
    assert_int_equal(rc, ARGS_OK);
    assert_string_equal(prompt, "--help");
    assert_true(verbose);
    assert_int_equal(a.port, 9);
    args_server_free(&a);
    rc = parse_v(&a, extra, err, sizeof err, "--promt", "x", (char *)NULL);
    assert_int_equal(rc, ARGS_EUSAGE);
    assert_string_equal(err, "unrecognized argument '--promt'; did you mean '--prompt'?");
    args_server_free(&a);
}

static char *write_tmp(const char *text)
{
    char *path = strdup("/tmp/sglc_test_args_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void test_config_yaml(void **state)
{
    (void)state;
    char *path = write_tmp("# sglc config\n"
                           "model-path: /models/x\n"
                           "port: 8000\n"
                           "context_length: 2048\n"
                           "disable-radix-cache: true\n"
                           "mem_fraction_static: 0.75\n"
                           "schedule-policy: lpm\n"
                           "tp-size: 1\n"
                           "encoder-urls: []\n"
                           "revision: null\n"
                           "json-model-override-args:\n"
                           "  rope_scaling: {type: linear, factor: 2.0}\n"
                           "  max_position_embeddings: 4096\n");
    args_server a;
    char err[256];
    /* the command line wins over the file */
    int rc = PARSE(&a, err, "--config", path, "--port", "9000");
    assert_int_equal(rc, ARGS_OK);
    assert_string_equal(a.model_path, "/models/x");
    assert_int_equal(a.port, 9000);
    assert_int_equal(a.source[ARG_ID_port], ARGS_SRC_CLI);
    assert_int_equal(a.context_length, 2048);
    assert_int_equal(a.source[ARG_ID_context_length], ARGS_SRC_CONFIG);
    assert_true(a.disable_radix_cache);
    assert_true(a.mem_fraction_static == 0.75);
    assert_string_equal(a.schedule_policy, "lpm");
    assert_string_equal(a.config, path);
    json_t *j = json_loads(a.json_model_override_args, 0, NULL);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "max_position_embeddings")), 4096);
    assert_true(json_real_value(json_object_get(json_object_get(j, "rope_scaling"), "factor")) == 2.0);
    json_decref(j);
    args_server_free(&a);
    /* --config=FILE spelling */
    char opt[300];
    snprintf(opt, sizeof opt, "--config=%s", path);
    assert_int_equal(PARSE(&a, err, opt), ARGS_OK);
    assert_int_equal(a.port, 8000);
    args_server_free(&a);
    /* order on the command line does not matter: the file is read first */
    rc = PARSE(&a, err, "--port", "9001", "--config", path);
    assert_int_equal(rc, ARGS_OK);
    assert_int_equal(a.port, 9001);
    args_server_free(&a);
    unlink(path);
    free(path);
}

static void test_config_errors(void **state)
{
    (void)state;
    args_server a;
    char err[256];
    struct {
        const char *yaml, *msg;
    } cases[] = {
        {"attn-cp-size: 2\n", "--attn-cp-size is not supported by sglc yet (in t.yaml)"},
        {"enable-multimodal: true\n", "--enable-multimodal is not supported by sglc yet (in t.yaml)"},
        {"port: abc\n", "--port: invalid int value 'abc' (in t.yaml)"},
        {"dtype: int4\n", "--dtype: invalid choice 'int4' (choose from {auto,float32,float16,bfloat16}) (in t.yaml)"},
        {"model-pth: x\n", "unrecognized argument 'model-pth'; did you mean '--model-path'? (in t.yaml)"},
        {"- a\n- b\n", "t.yaml: the top level must be a mapping of argument: value"},
        {"port: [1, 2]\n", "t.yaml: --port expects a single value, not a list or mapping"},
        {"disable-radix-cache: maybe\n", "--disable-radix-cache: expected true or false, got 'maybe' (in t.yaml)"},
        {"config: other.yaml\n", "t.yaml: 'config' cannot appear inside a config file"},
        {"port: [\n", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(args_server_init(&a), ARGS_OK);
        int rc = args_load_config_string(&a, cases[i].yaml, strlen(cases[i].yaml), "t.yaml", err, sizeof err);
        assert_int_equal(rc, ARGS_EUSAGE);
        if (cases[i].msg)
            assert_string_equal(err, cases[i].msg);
        else
            assert_non_null(strstr(err, "YAML error"));
        args_server_free(&a);
    }
    /* an empty file is fine */
    assert_int_equal(args_server_init(&a), ARGS_OK);
    assert_int_equal(args_load_config_string(&a, "", 0, "t.yaml", err, sizeof err), ARGS_OK);
    args_server_free(&a);
    /* a missing file is an error naming it */
    assert_int_equal(PARSE(&a, err, "--config", "/nonexistent/x.yaml"), ARGS_EIO);
    assert_non_null(strstr(err, "/nonexistent/x.yaml"));
    args_server_free(&a);
}

static void test_json_dump_and_finalize(void **state)
{
    (void)state;
    args_server a;
    char err[256];
    assert_int_equal(PARSE(&a, err, "--model-path", "/m", "--max-total-tokens", "1000"), ARGS_OK);
    assert_int_equal(args_finalize(&a), ARGS_OK);
    assert_string_equal(a.tokenizer_path, "/m");
    assert_string_equal(a.served_model_name, "/m");
    assert_true(a.random_seed >= 0 && a.random_seed <= (1 << 30));
    json_t *j = args_to_json(&a);
    assert_non_null(j);
    assert_int_equal(json_object_size(j), ARG_COUNT);
    assert_string_equal(json_string_value(json_object_get(j, "model_path")), "/m");
    assert_int_equal(json_integer_value(json_object_get(j, "max_total_tokens")), 1000);
    assert_true(json_is_null(json_object_get(j, "context_length")));
    assert_true(json_is_null(json_object_get(j, "mem_fraction_static")));
    assert_true(json_is_false(json_object_get(j, "disable_radix_cache")));
    assert_true(json_real_value(json_object_get(j, "schedule_conservativeness")) == 1.0);
    assert_true(json_is_array(json_object_get(j, "encoder_urls")));
    assert_true(json_is_null(json_object_get(j, "cuda_graph_bs")));
    json_decref(j);
    args_server_free(&a);
}

static void test_help(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    args_extra extra[] = {{.name = "--prompt", .metavar = "TEXT", .help = "The prompt."}, {0}};
    args_print_help(f, "usage: sglc serve [OPTIONS]", extra);
    fclose(f);
    assert_non_null(strstr(buf, "usage: sglc serve"));
    assert_non_null(strstr(buf, "\nModel and tokenizer:\n"));
    assert_non_null(strstr(buf, "\nMemory and scheduling:\n"));
    assert_non_null(strstr(buf, "--model-path, --model STR\n"));
    assert_non_null(strstr(buf, "--attn-cp-size, --attention-context-parallel-size INT  (not yet)\n"));
    assert_non_null(strstr(buf, "--trust-remote-code  (ignored)\n"));
    assert_non_null(strstr(buf, "--dtype {auto,float32,float16,bfloat16}\n"));
    assert_non_null(strstr(buf, "--prompt TEXT\n"));
    /* every argument appears */
    for (int i = 0; i < ARG_COUNT; i++) {
        char flag[128];
        snprintf(flag, sizeof flag, " %.*s", (int)strcspn(args_specs[i].flags, " "), args_specs[i].flags);
        assert_non_null(strstr(buf, flag));
    }
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_table_consistent),
        cmocka_unit_test(test_each_kind),
        cmocka_unit_test(test_lists),
        cmocka_unit_test(test_choices_and_bad_values),
        cmocka_unit_test(test_cli_errors),
        cmocka_unit_test(test_not_yet_and_ignored),
        cmocka_unit_test(test_extra_options),
        cmocka_unit_test(test_abbreviations),
        cmocka_unit_test(test_gpu_flags_ignored),
        cmocka_unit_test(test_config_yaml),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_json_dump_and_finalize),
        cmocka_unit_test(test_help),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
