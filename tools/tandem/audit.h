/* tandem audit (cmd_audit.c): models x devices before a migration. */
#ifndef TDM_CLI_AUDIT_H
#define TDM_CLI_AUDIT_H

#include <stdio.h>

int cmd_audit(int argc, char **argv);
void usage_audit(FILE *f);

#endif
