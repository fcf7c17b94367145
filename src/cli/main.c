/* main.c — the vramguard command: verb dispatch. The verbs' shared helpers are args.c's,
 * their help help.c's. Exit codes: 0 success, 1 the verb found a problem, 2 a usage or
 * input error; `run` returns the program's own code.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int main(int argc, char **argv) {
    if (argc < 2) {
        cli_print_usage(stderr);
        return CLI_USAGE;
    }
    const char *verb = argv[1];
    if (strcmp(verb, "help") == 0 || strcmp(verb, "--help") == 0 || strcmp(verb, "-h") == 0) {
        if (argc < 3) {
            cli_print_usage(stdout);
        } else if (strcmp(argv[2], "options") == 0) {
            cli_print_options_help(stdout);
        } else if (cli_verb(argv[2])) {
            cli_print_verb_help(stdout, cli_verb(argv[2]));
        } else {
            cli_error("no help on '%s': ask for a verb (demo, replay, run, report) or "
                      "'options'", argv[2]);
            return CLI_USAGE;
        }
        return CLI_OK;
    }
    if (strcmp(verb, "version") == 0 || strcmp(verb, "--version") == 0) {
        printf("vramguard %s\n", VG_VERSION_STRING);
        return CLI_OK;
    }
    if (strcmp(verb, "demo") == 0)
        return cmd_demo(argc - 2, argv + 2);
    if (strcmp(verb, "replay") == 0)
        return cmd_replay(argc - 2, argv + 2);
    if (strcmp(verb, "run") == 0)
        return cmd_run(argc - 2, argv + 2);
    if (strcmp(verb, "report") == 0)
        return cmd_report(argc - 2, argv + 2);
    cli_error("unknown verb '%s' (see 'vramguard help')", verb);
    return CLI_USAGE;
}
