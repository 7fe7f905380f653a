/* sglc — an LLM serving engine in C.  main() only dispatches subcommands;
 * each lives in src/cli/cmd_*.c. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"serve", cmd_serve, "the HTTP server: SGLang native + OpenAI-compatible API"},
    {"generate", cmd_generate, "generate for one prompt, or --requests FILE.jsonl through the scheduler"},
    {"bench-one-batch", cmd_bench_one_batch, "time prefill + decode of one static batch"},
    {"bench-offline", cmd_bench_offline, "offline throughput through the scheduler (sglang.bench_offline_throughput)"},
    {"bench-allreduce", cmd_bench_allreduce, "latency of the tensor-parallel all-reduce between ranks"},
    {"bench-serving", cmd_bench_serving, "load generator for a running server (sglang.bench_serving)"},
    {"tokenize", cmd_tokenize, "JSON lines {\"text\"} -> {\"ids\"} with a model's tokenizer"},
    {"detokenize", cmd_detokenize, "JSON lines {\"ids\"} -> {\"text\"} with a model's tokenizer"},
    {"grammar-check", cmd_grammar_check, "JSON strings on stdin -> {\"accepted\"} against a JSON Schema / regex / EBNF"},
    {"bench-grammar", cmd_bench_grammar, "grammar compile and token-mask time over a folder of schemas"},
    {"grammar-sample", cmd_grammar_sample, "random outputs constrained by a JSON Schema (a stand-in for a random-weight model)"},
    {"chat-template", cmd_chat_template, "render chat prompts from JSON lines (check templates)"},
    {"server-args", cmd_server_args, "parse server arguments, print the effective ones as JSON"},
    {"perplexity", cmd_perplexity, "perplexity of a model on a text file (llama.cpp's method)"},
    {"quantize", cmd_quantize, "convert a Hugging Face folder to a GGUF file (F32 ... Q4_K_M, IQ4_XS) or a compressed-tensors folder (W8A8, W4A16)"},
    {"download", cmd_download, "download a model from the Hugging Face hub into the cache"},
    {"cpu-info", cmd_cpu_info, "print CPU features and the kernel ISA chosen"},
    {"version", cmd_version, "print the version"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: sglc COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-16s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n'sglc COMMAND --help' describes a command's arguments.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) return cmd_version(argc - 1, argv + 1);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "sglc: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
