/* tandem audit (cmd_audit.c): models x devices before a migration. */
#ifndef TDM_CLI_AUDIT_H
#define TDM_CLI_AUDIT_H

#include <stddef.h>
#include <stdio.h>

int cmd_audit(int argc, char **argv);
void usage_audit(FILE *f);

/* Reading the ledger's cJSON (cmd_audit.c; also logs and diff): the string
 * member key of o ("" when absent or not a string), the number (dflt). */
struct cJSON;
const char *audit_jstr(const struct cJSON *o, const char *key);
double audit_jnum(const struct cJSON *o, const char *key, double dflt);

/* What the user can do about fallback nodes of op type op that device
 * refused with reason code r and sentence d: one sentence into out ("" when
 * the reason has none). dyn names the model's dynamic inputs no --shape
 * fixes ("" none, NULL unknown). */
void audit_hint(const char *r, const char *op, const char *d, const char *device, const char *dyn, char *out,
                size_t size);

#endif
