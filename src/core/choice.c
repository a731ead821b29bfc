/* The words of the session options' choices (tandem.h "session options"):
 * one table per enum, read in both directions, the one place they are
 * spelled. The CLI, the Python package, the Triton backend and the planner
 * (TANDEM_FALLBACK) parse through these functions. */
#include "core/ctx.h"

#include <stdlib.h>
#include <string.h>

typedef struct choice {
    const char *what;   /* "a granularity" */
    const char *words[6];
    const char *list;   /* the words as a sentence lists them */
} choice;

static const choice granularities = {
    "a granularity", {"op", "subgraph", "graph", "auto", "greedy", NULL}, "op, subgraph, graph, auto or greedy"};
static const choice fallback_modes = {
    "a fallback mode", {"allow", "deny", "deny-compute", NULL}, "allow, deny or deny-compute"};
static const choice fusions = {"a fusion mode", {"off", "on", "observed", NULL}, "off, on or observed"};
static const choice rescue_modes = {"a rescue mode", {"off", "safe", "all", NULL}, "off, safe or all"};
static const choice verify_modes = {"a verify mode", {"off", "first", "every", NULL}, "off, first or every:N (N >= 1)"};

static const char *choice_name(const choice *c, int v)
{
    for (int k = 0; c->words[k]; k++)
        if (k == v)
            return c->words[k];
    return "?";
}

/* The index of word in c, or -1 with the sentence on ctx. */
static int choice_find(tdm_ctx *ctx, const choice *c, const char *word)
{
    for (int k = 0; word && c->words[k]; k++)
        if (strcmp(word, c->words[k]) == 0)
            return k;
    tdm_err local;
    err_set(ctx ? &ctx->err : &local, TDM_E_USAGE, "'%s' is not %s (%s)", word ? word : "(null)", c->what, c->list);
    return -1;
}

static tdm_status choice_parse(tdm_ctx *ctx, const choice *c, const char *word, int *out)
{
    if (ctx)
        err_clear(&ctx->err);
    int k = choice_find(ctx, c, word);
    if (k < 0)
        return TDM_E_USAGE;
    *out = k;
    return TDM_OK;
}

/* The public parser and namer of one choice: FN_parse and FN_name over
 * the table of its words. */
#define CHOICE_API(fn, type, table)                                                                                   \
    tdm_status fn##_parse(tdm_ctx *ctx, const char *word, type *out)                                                \
    {                                                                                                                 \
        int v;                                                                                                        \
        tdm_status st = out ? choice_parse(ctx, &table, word, &v) : TDM_E_USAGE;                                    \
        if (!st)                                                                                                      \
            *out = (type)v;                                                                                           \
        return st;                                                                                                    \
    }                                                                                                                 \
    const char *fn##_name(type value) { return choice_name(&table, (int)value); }

CHOICE_API(tdm_granularity, tdm_granularity, granularities)
CHOICE_API(tdm_fallback_mode, tdm_fallback_mode, fallback_modes)
CHOICE_API(tdm_fusion, tdm_fusion, fusions)
CHOICE_API(tdm_rescue_mode, tdm_rescue_mode, rescue_modes)

/* every:N carries a number, so it has a parser of its own around the table. */
tdm_status tdm_verify_mode_parse(tdm_ctx *ctx, const char *word, tdm_verify_mode *out, int *every)
{
    if (!out || !every)
        return TDM_E_USAGE;
    if (word && strncmp(word, "every:", 6) == 0) {
        char *end;
        long n = strtol(word + 6, &end, 10);
        if (end != word + 6 && !*end && n >= 1 && n <= 1000000000L) {
            if (ctx)
                err_clear(&ctx->err);
            *out = TDM_VERIFY_EVERY;
            *every = (int)n;
            return TDM_OK;
        }
    }
    int v;
    /* "every" alone needs its N */
    if (word && strcmp(word, "every") == 0)
        word = "every:";
    tdm_status st = choice_parse(ctx, &verify_modes, word, &v);
    if (!st) {
        *out = (tdm_verify_mode)v;
        *every = 0;
    }
    return st;
}

const char *tdm_verify_mode_name(tdm_verify_mode m) { return choice_name(&verify_modes, (int)m); }
