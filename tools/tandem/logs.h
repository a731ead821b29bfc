/* tandem logs and tandem diff (cmd_logs.c, cmd_diff.c): the fallback logs,
 * ledgers and profiles of many runs, and the before/after of two of them. */
#ifndef TDM_CLI_LOGS_H
#define TDM_CLI_LOGS_H

#include <stddef.h>
#include <stdio.h>

int cmd_logs(int argc, char **argv);
void usage_logs(FILE *f);
int cmd_diff(int argc, char **argv);
void usage_diff(FILE *f);

/* The regular file at path, NUL-terminated (malloc'd, *len bytes without
 * the NUL), or NULL after printing one sentence naming it; *rc is then
 * EXIT_IO (missing, unreadable, not a regular file, over 1 GiB). */
char *logs_read_file(const char *path, size_t *len, int *rc);
/* "resnet18.onnx" for "../models/resnet18.onnx". */
const char *logs_base(const char *path);

#endif
