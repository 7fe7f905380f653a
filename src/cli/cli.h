/* cli — the subcommands of the sglc binary.  Each returns the process exit
 * status: 0 ok, 1 runtime failure, 2 bad arguments. */
#ifndef SGLC_CLI_H
#define SGLC_CLI_H

#include "util/version.h" /* SGLC_VERSION */

int cmd_version(int argc, char **argv);
int cmd_cpu_info(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_bench_one_batch(int argc, char **argv);
int cmd_server_args(int argc, char **argv);
int cmd_download(int argc, char **argv);
int cmd_quantize(int argc, char **argv); /* HF folder -> GGUF */
int cmd_perplexity(int argc, char **argv); /* llama.cpp-style perplexity of a text file */
int cmd_generate_requests(int argc, char **argv); /* generate --requests */
int cmd_bench_offline(int argc, char **argv);
int cmd_chat_template(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_bench_allreduce(int argc, char **argv); /* tensor-parallel all-reduce latency */
int cmd_bench_serving(int argc, char **argv); /* load generator for a running server */
int cmd_grammar_check(int argc, char **argv);  /* cmd_grammar.c */
int cmd_bench_grammar(int argc, char **argv);
int cmd_grammar_sample(int argc, char **argv); /* cmd_grammar_sample.c */

#endif
