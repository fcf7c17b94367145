/* cmd_report.c — `vramguard report FILE.json [FILE.json ...] [--html OUT] [--svg OUT]
 * [--chrome-trace OUT]`: read snapshots (one per rank), print the text summary, and write
 * the pictures asked for. Several files are merged into one view with a row per rank. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "report_model.h"

int cmd_report(int argc, char **argv) {
    cli_args_t a;
    int exit_code;
    if (!cli_parse(argc, argv, cli_verb("report"), &a, &exit_code))
        return exit_code;
    if (a.options[0]) {
        cli_error("report takes no vramguard options (it only reads snapshot files)");
        return CLI_USAGE;
    }
    int n = 0;
    while (cli_positional(&a, n))
        n++;
    if (n == 0) {
        cli_error("usage: vramguard report SNAPSHOT.json [SNAPSHOT.json ...] [--html OUT.html] "
                  "[--svg OUT.svg] [--chrome-trace OUT.json] [--group=site|size] [--quiet]");
        return CLI_USAGE;
    }
    const char *group = cli_flag(&a, "group", NULL);
    if (group) {
        if (strcmp(group, "site") == 0)
            rp_group = RP_GROUP_SITE;
        else if (strcmp(group, "size") == 0)
            rp_group = RP_GROUP_SIZE;
        else if (strcmp(group, "auto") != 0) {
            cli_error("bad value '%s' for --group: expected site, size or auto", group);
            return CLI_USAGE;
        }
    }
    rp_file_t *files = calloc((size_t)n, sizeof *files);
    if (!files) {
        cli_error("out of memory");
        return CLI_FAILED;
    }
    int rc = CLI_OK, loaded = 0;
    for (int i = 0; i < n; i++, loaded++) {
        char err[600];
        if (!rp_load(cli_positional(&a, i), &files[i], err, sizeof err)) {
            cli_error("%s", err);
            rc = CLI_USAGE;
            break;
        }
    }
    bool quiet = false;
    cli_flag(&a, "quiet", &quiet);
    const char *html = cli_flag(&a, "html", NULL), *svg = cli_flag(&a, "svg", NULL),
               *chrome = cli_flag(&a, "chrome-trace", NULL);
    if (rc == CLI_OK && !quiet)
        rp_write_text(stdout, files, n);
    if (rc == CLI_OK && html && rp_write_html(html, files, n) != 0)
        rc = CLI_USAGE;
    if (rc == CLI_OK && svg && rp_write_svg(svg, files, n) != 0)
        rc = CLI_USAGE;
    if (rc == CLI_OK && chrome && rp_write_chrome(chrome, files, n) != 0)
        rc = CLI_USAGE;
    for (int i = 0; i < loaded; i++)
        rp_free(&files[i]);
    free(files);
    return rc;
}
