#include "cli/cli.h"
int cmd_download(int argc, char **argv) { (void)argc; (void)argv; return 1; }
