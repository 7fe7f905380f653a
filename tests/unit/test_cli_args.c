/* test_cli_args — one argument surface for every command: typed command
 * options (args_extra: int, float, int list, choice, flag) with the same
 * messages as the server arguments, commands without server arguments
 * (bench-serving), per-command --help, and the mapping of the parsed
 * server arguments onto the model loader and the scheduler that serve and
 * the offline commands share (defaults must equal the engine's). */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "args/args.h"
#include "cli/cli_args.h"
#include "kv/kv_radix.h"
#include "util/dtype.h"
#include "util/log.h"

/* Parse a NULL-terminated token list for `cmd` (argv[0] = "test"). */
static int parse_cmd(args_server *a, const args_cmd *cmd, char *err, size_t errlen, ...)
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
    return args_parse_cmd(a, cmd, argc, argv, err, errlen);
}
#define P(a, cmd, err, ...) parse_cmd(a, cmd, err, sizeof err, __VA_ARGS__, (char *)NULL)

typedef struct opts {
    long long n;
    double r;
    int list[4];
    int n_list;
    const char *mode;
    bool flag;
} opts;

static void extras_of(opts *o, args_extra *ex)
{
    args_extra rows[] = {
        {.name = "--n", .metavar = "N", .ival = &o->n, .lo = 1, .hi = 100, .def = "5"},
        {.name = "--at-least", .metavar = "N", .ival = &o->n, .lo = 0, .hi = ARGS_NO_MAX},
        {.name = "--r", .metavar = "R", .fval = &o->r, .lo = 0, .hi = 1},
        {.name = "--list", .metavar = "B", .ilist = o->list, .n_ilist = &o->n_list,
         .max_ilist = 4, .lo = 1, .hi = 1000},
        {.name = "--mode", .value = &o->mode, .choices = "fast|slow"},
        {.name = "--flag", .flag = &o->flag},
        {0},
    };
    memcpy(ex, rows, sizeof rows);
}

static void test_typed_extras(void **state)
{
    (void)state;
    opts o = {.n = 5, .mode = "fast"};
    args_extra ex[7];
    extras_of(&o, ex);
    args_cmd cmd = {.extra = ex};
    args_server a;
    char err[256];
    assert_int_equal(P(&a, &cmd, err, "--n", "7", "--r=0.25", "--list", "1", "8", "32", "--mode", "slow",
                       "--flag", "--port", "9"),
                     ARGS_OK);
    assert_int_equal(o.n, 7);
    assert_true(o.r == 0.25);
    assert_int_equal(o.n_list, 3);
    assert_int_equal(o.list[0], 1);
    assert_int_equal(o.list[2], 32);
    assert_string_equal(o.mode, "slow");
    assert_true(o.flag);
    assert_int_equal(a.port, 9); /* server arguments alongside */
    args_server_free(&a);

    static const struct {
        const char *flag, *val, *msg;
    } bad[] = {
        {"--n", "x", "--n: invalid int value 'x'"},
        {"--n", "0", "--n must be in [1, 100], got '0'"},
        {"--n", "101", "--n must be in [1, 100], got '101'"},
        {"--at-least", "-1", "--at-least must be at least 0, got '-1'"},
        {"--r", "1.5", "--r must be in [0, 1], got '1.5'"},
        {"--r", "nan", "--r: invalid float value 'nan'"},
        {"--list", "x", "--list: invalid int value 'x'"},
        {"--list", "0", "--list must be in [1, 1000], got '0'"},
        {"--mode", "medium", "--mode: invalid choice 'medium' (choose from {fast,slow})"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(P(&a, &cmd, err, bad[i].flag, bad[i].val), ARGS_EUSAGE);
        assert_string_equal(err, bad[i].msg);
        args_server_free(&a);
    }
    assert_int_equal(P(&a, &cmd, err, "--list", "1", "2", "3", "4", "5"), ARGS_EUSAGE);
    assert_string_equal(err, "--list takes at most 4 values");
    args_server_free(&a);
    assert_int_equal(P(&a, &cmd, err, "--list", "--flag"), ARGS_EUSAGE);
    assert_string_equal(err, "--list expects at least one value");
    args_server_free(&a);
    assert_int_equal(P(&a, &cmd, err, "--n"), ARGS_EUSAGE);
    assert_string_equal(err, "--n expects a value");
    args_server_free(&a);
    assert_int_equal(P(&a, &cmd, err, "--flag=1"), ARGS_EUSAGE);
    assert_string_equal(err, "--flag takes no value");
    args_server_free(&a);
    /* the server arguments keep their own checks next to the extras */
    assert_int_equal(P(&a, &cmd, err, "--n", "3", "--attn-cp-size", "2"), ARGS_EUSAGE);
    assert_string_equal(err, "--attn-cp-size is not supported by sglc yet");
    args_server_free(&a);
    assert_int_equal(P(&a, &cmd, err, "--flg"), ARGS_EUSAGE);
    assert_string_equal(err, "unrecognized argument '--flg'; did you mean '--flag'?");
    args_server_free(&a);
}

static void test_no_server_args(void **state)
{
    (void)state;
    long long port = 30000;
    const char *model = NULL;
    args_extra ex[] = {
        {.name = "--port", .metavar = "P", .ival = &port, .lo = 1, .hi = 65535},
        {.name = "--model", .metavar = "NAME", .value = &model},
        {0},
    };
    args_cmd cmd = {.extra = ex, .no_server_args = true};
    args_server a;
    char err[256];
    /* --port and --model are the command's own (the server's are not
     * looked at: --model is not the --model-path alias here) */
    assert_int_equal(P(&a, &cmd, err, "--port", "8000", "--model", "m"), ARGS_OK);
    assert_int_equal(port, 8000);
    assert_string_equal(model, "m");
    assert_null(a.model_path);
    args_server_free(&a);
    assert_int_equal(P(&a, &cmd, err, "--max-total-tokens", "5"), ARGS_EUSAGE);
    assert_string_equal(err, "unrecognized argument '--max-total-tokens'");
    args_server_free(&a);
    assert_int_equal(P(&a, &cmd, err, "--config", "x.yaml"), ARGS_EUSAGE);
    assert_string_equal(err, "unrecognized argument '--config'");
    args_server_free(&a);
    assert_int_equal(P(&a, &cmd, err, "--prot", "1"), ARGS_EUSAGE);
    assert_string_equal(err, "unrecognized argument '--prot'; did you mean '--port'?");
    args_server_free(&a);
}

/* A tool that takes only some server arguments: those keep the table's
 * checks; every other one is unrecognized (no suggestion from the rest). */
static void test_only_shown(void **state)
{
    (void)state;
    bool fmt = false;
    args_extra ex[] = {{.name = "--content-format", .flag = &fmt}, {0}};
    static const int shown[] = {ARG_ID_tokenizer_path, ARG_ID_tokenizer_mode, ARG_COUNT};
    args_cmd cmd = {.extra = ex, .shown = shown, .only_shown = true};
    args_server a;
    char err[256];
    assert_int_equal(P(&a, &cmd, err, "--tokenizer-path", "/t", "--tokenizer-mode", "slow", "--content-format"),
                     ARGS_OK);
    assert_string_equal(a.tokenizer_path, "/t");
    assert_string_equal(a.tokenizer_mode, "slow");
    assert_true(fmt);
    args_server_free(&a);
    assert_int_equal(P(&a, &cmd, err, "--tokenizer-mode", "fast"), ARGS_EUSAGE);
    assert_string_equal(err, "--tokenizer-mode: invalid choice 'fast' (choose from {auto,slow})");
    args_server_free(&a);
    assert_int_equal(P(&a, &cmd, err, "--port", "1"), ARGS_EUSAGE);
    assert_string_equal(err, "--port is a server argument this command does not use (see its --help; `sglc serve` takes it)");
    args_server_free(&a);
    assert_int_equal(P(&a, &cmd, err, "--config", "x.yaml"), ARGS_EUSAGE);
    assert_string_equal(err, "--config is a server argument this command does not use (see its --help; `sglc serve` takes it)");
    args_server_free(&a);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    args_print_cmd_help(f, &cmd);
    fclose(f);
    assert_non_null(strstr(buf, " --tokenizer-mode {auto,slow}"));
    assert_non_null(strstr(buf, "(only these)"));
    assert_null(strstr(buf, "--config"));
    assert_non_null(strstr(buf, "Other server arguments are refused here: `sglc serve --help` lists them all."));
    free(buf);
}

static char *help_of(const args_cmd *cmd)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    args_print_cmd_help(f, cmd);
    fclose(f);
    return buf;
}

static void test_cmd_help(void **state)
{
    (void)state;
    long long n = 0;
    args_extra ex[] = {{.name = "--batch-size", .metavar = "B", .help = "Batch sizes.", .ival = &n, .def = "1"},
                       {0}};
    static const int shown[] = {CLI_MODEL_ARG_IDS, ARG_COUNT};
    args_cmd cmd = {.usage = "usage: sglc x", .about = "About x.", .extra = ex, .shown = shown};
    char *h = help_of(&cmd);
    assert_non_null(strstr(h, "usage: sglc x\n"));
    assert_non_null(strstr(h, "About x."));
    assert_non_null(strstr(h, "Command options:\n  --batch-size B\n        Batch sizes. [default: 1]\n"));
    assert_non_null(strstr(h, "Server arguments used by this command:\n"));
    assert_non_null(strstr(h, " --model-path, --model STR\n"));
    assert_non_null(strstr(h, " --dtype {auto,float32,float16,bfloat16}\n"));
    assert_non_null(strstr(h, " --config STR\n"));
    assert_non_null(strstr(h, "sglc serve --help"));
    assert_null(strstr(h, "--attn-cp-size")); /* accepted, but not listed */
    free(h);
    cmd.no_server_args = true;
    h = help_of(&cmd);
    assert_non_null(strstr(h, "--batch-size B"));
    assert_null(strstr(h, "--model-path"));
    assert_null(strstr(h, "Server arguments"));
    free(h);
    cmd.no_server_args = false;
    cmd.shown = NULL; /* serve: every argument by group */
    h = help_of(&cmd);
    assert_non_null(strstr(h, "\nMemory and scheduling:\n"));
    assert_non_null(strstr(h, "--attn-cp-size"));
    free(h);
}

/* No server argument given: the scheduler gets exactly the engine's own
 * defaults, so serve and the offline commands start alike. */
static void test_sched_mapping(void **state)
{
    (void)state;
    args_cmd cmd = {0};
    args_server a;
    char err[256];
    assert_int_equal(P(&a, &cmd, err, "--model-path", "/m"), ARGS_OK);
    sched_args got, want;
    cli_sched_args_from_args(&got, &a);
    sched_args_init(&want);
    /* the one default the library does not share: it logs no batch lines */
    assert_int_equal(got.decode_log_interval, 40);
    want.decode_log_interval = 40;
    assert_memory_equal(&got, &want, sizeof got);
    args_server_free(&a);

    assert_int_equal(P(&a, &cmd, err, "--page-size", "16", "--max-total-tokens", "8192", "--mem-fraction-static",
                       "0.5", "--max-running-requests", "7", "--max-queued-requests", "9", "--max-prefill-tokens",
                       "1024", "--chunked-prefill-size", "-1", "--prefill-max-requests", "3", "--schedule-policy",
                       "lof", "--schedule-conservativeness", "0.5", "--disable-radix-cache",
                       "--radix-eviction-policy", "lfu", "--enable-mixed-chunk", "--enable-priority-scheduling",
                       "--schedule-low-priority-values-first", "--priority-scheduling-preemption-threshold", "0",
                       "--abort-on-priority-when-disabled", "--stream-interval", "4", "--disable-priority-preemption",
                       "--default-priority-value", "-3", "--decode-log-interval", "5"),
                     ARGS_OK);
    cli_sched_args_from_args(&got, &a);
    assert_int_equal(got.page_size, 16);
    assert_int_equal(got.max_total_tokens, 8192);
    assert_true(got.mem_fraction_static == 0.5);
    assert_int_equal(got.max_running_requests, 7);
    assert_int_equal(got.max_queued_requests, 9);
    assert_int_equal(got.max_prefill_tokens, 1024);
    assert_int_equal(got.chunked_prefill_size, -1);
    assert_int_equal(got.prefill_max_requests, 3);
    assert_int_equal(got.schedule_policy, SCHED_POLICY_LOF);
    assert_true(got.schedule_conservativeness == 0.5);
    assert_true(got.disable_radix_cache && got.enable_mixed_chunk && got.enable_priority_scheduling);
    assert_true(got.schedule_low_priority_values_first && got.abort_on_priority_when_disabled);
    assert_int_equal(got.radix_eviction_policy, KV_EVICT_LFU);
    assert_int_equal(got.priority_scheduling_preemption_threshold, 0);
    assert_int_equal(got.stream_interval, 4);
    assert_true(got.disable_priority_preemption && got.has_default_priority);
    assert_int_equal(got.default_priority_value, -3);
    assert_int_equal(got.decode_log_interval, 5);
    args_server_free(&a);

    /* every policy the scheduler has is a choice of --schedule-policy */
    for (int p = SCHED_POLICY_FCFS; p <= SCHED_POLICY_RANDOM; p++) {
        assert_int_equal(P(&a, &cmd, err, "--schedule-policy", sched_policy_name((sched_policy)p)), ARGS_OK);
        cli_sched_args_from_args(&got, &a);
        assert_int_equal(got.schedule_policy, p);
        args_server_free(&a);
    }
    /* the bounds the offline parser had are the table's checks now */
    static const struct {
        const char *flag, *val, *msg;
    } bad[] = {
        {"--stream-interval", "0", "--stream-interval must be at least 1, got 0"},
        {"--max-queued-requests", "0", "--max-queued-requests must be at least 1, got 0"},
        {"--prefill-max-requests", "0", "--prefill-max-requests must be at least 1, got 0"},
        {"--priority-scheduling-preemption-threshold", "-1",
         "--priority-scheduling-preemption-threshold must be at least 0, got -1"},
        {"--schedule-conservativeness", "-0.5", "--schedule-conservativeness must be at least 0, got -0.5"},
        {"--chunked-prefill-size", "0", "--chunked-prefill-size must be -1 (off) or at least 1, got 0"},
        {"--speculative-accept-threshold-single", "0", "--speculative-accept-threshold-single must be in (0, 1], got 0"},
        {"--speculative-accept-threshold-acc", "1.5", "--speculative-accept-threshold-acc must be in (0, 1], got 1.5"},
        {"--schedule-policy", "xyz",
         "--schedule-policy: invalid choice 'xyz' (choose from {fcfs,lpm,dfs-weight,lof,random})"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(P(&a, &cmd, err, bad[i].flag, bad[i].val), ARGS_EUSAGE);
        assert_string_equal(err, bad[i].msg);
        args_server_free(&a);
    }
}

static void test_model_mapping(void **state)
{
    (void)state;
    args_cmd cmd = {0};
    args_server a;
    char err[256];
    assert_int_equal(P(&a, &cmd, err, "--model-path", "/m"), ARGS_OK);
    cli_model_opts mo;
    cli_model_opts_from_args(&mo, &a, 0);
    assert_string_equal(mo.load.model_path, "/m");
    assert_int_equal(mo.load.dtype, -1);
    assert_int_equal(mo.load.load_format, MODEL_LOAD_AUTO);
    assert_int_equal(mo.load.context_length, 0);
    assert_int_equal(mo.load.random_seed, 0); /* None: dummy weights seeded with 0 */
    assert_int_equal(mo.kv_dtype, -1);
    assert_int_equal(mo.threads, 0);
    assert_null(mo.revision);
    assert_int_equal(mo.pack_threads, 0); /* the compute threads */
    assert_false(mo.fp32_lm_head);
    args_server_free(&a);
    /* --model-loader-extra-config: SGLang's DefaultModelLoader keys */
    static const struct {
        const char *json;
        int rc, threads;
        const char *msg;
    } xc[] = {
        {"{\"enable_multithread_load\": true}", ARGS_OK, 8, NULL},
        {"{\"enable_multithread_load\": true, \"num_threads\": 3}", ARGS_OK, 3, NULL},
        {"{\"enable_multithread_load\": false, \"num_threads\": 3}", ARGS_OK, 1, NULL},
        {"{}", ARGS_OK, 0, NULL}, /* absent: the compute threads */
        {"{\"foo\": 1}", ARGS_EUSAGE, 0, "Unexpected extra config keys for load format auto: {'foo'}"},
        {"{\"num_threads\": 0}", ARGS_EUSAGE, 0, "num_threads must be an integer in [1, 256]"},
        {"{\"enable_multithread_load\": 1}", ARGS_EUSAGE, 0, "enable_multithread_load must be true or false"},
        {"[1]", ARGS_EUSAGE, 0, "must be a JSON object"},
    };
    for (size_t i = 0; i < sizeof xc / sizeof xc[0]; i++) {
        int rc = P(&a, &cmd, err, "--model-path", "/m", "--model-loader-extra-config", xc[i].json,
                   "--enable-fp32-lm-head");
        assert_int_equal(rc, xc[i].rc);
        if (rc != ARGS_OK) {
            assert_non_null(strstr(err, xc[i].msg));
            args_server_free(&a);
            continue;
        }
        cli_model_opts_from_args(&mo, &a, 0);
        assert_int_equal(mo.pack_threads, xc[i].threads);
        assert_true(mo.fp32_lm_head);
        args_server_free(&a);
    }
    assert_int_equal(P(&a, &cmd, err, "--model-path", "/m", "--dtype", "bfloat16", "--load-format", "dummy",
                       "--context-length", "256", "--random-seed", "7", "--kv-cache-dtype", "bfloat16",
                       "--revision", "v1", "--download-dir", "/d", "--json-model-override-args", "{\"a\":1}"),
                     ARGS_OK);
    cli_model_opts_from_args(&mo, &a, 3);
    assert_int_equal(mo.load.dtype, DTYPE_BF16);
    assert_int_equal(mo.load.load_format, MODEL_LOAD_DUMMY);
    assert_int_equal(mo.load.context_length, 256);
    assert_int_equal(mo.load.random_seed, 7);
    assert_int_equal(mo.kv_dtype, DTYPE_BF16);
    assert_int_equal(mo.threads, 3);
    assert_string_equal(mo.revision, "v1");
    assert_string_equal(mo.download_dir, "/d");
    assert_string_equal(mo.load.override_json, "{\"a\":1}");
    args_server_free(&a);
    assert_int_equal(P(&a, &cmd, err, "--dtype", "float16"), ARGS_OK);
    cli_model_opts_from_args(&mo, &a, 0);
    assert_int_equal(mo.load.dtype, DTYPE_F16);
    args_server_free(&a);
}

/* --config works for every command that takes server arguments; the
 * command's own options are command-line only. */
static void test_config_with_extras(void **state)
{
    (void)state;
    char path[] = "/tmp/test_cli_args_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *yaml = "max-total-tokens: 4096\nschedule_policy: lpm\n";
    assert_int_equal(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
    close(fd);
    long long n = 0;
    args_extra ex[] = {{.name = "--n", .metavar = "N", .ival = &n}, {0}};
    args_cmd cmd = {.extra = ex};
    args_server a;
    char err[256];
    assert_int_equal(P(&a, &cmd, err, "--config", path, "--n", "4", "--schedule-policy", "fcfs"), ARGS_OK);
    assert_int_equal(n, 4);
    assert_int_equal(a.max_total_tokens, 4096);
    assert_string_equal(a.schedule_policy, "fcfs"); /* command line wins */
    args_server_free(&a);
    unlink(path);
}

int main(void)
{
    log_set_level(LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_typed_extras),   cmocka_unit_test(test_no_server_args),
        cmocka_unit_test(test_cmd_help),       cmocka_unit_test(test_sched_mapping),
        cmocka_unit_test(test_model_mapping),  cmocka_unit_test(test_config_with_extras),
        cmocka_unit_test(test_only_shown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
