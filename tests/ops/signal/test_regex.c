/* Unit test of RegexFullMatch: patterns in RE2 syntax against the full
 * matches Python's re.fullmatch gives for them (the ONNX reference; these
 * patterns mean the same in RE2), and the forms refused with a sentence.
 *
 * usage: test_ops_regex   (exit 0 pass, 1 fail) */
#include "ops/signal.h"
#include "graph/graph.h"
#include "core/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static tdm_err err;

/* Runs RegexFullMatch(pattern) on n strings; returns the status and fills
 * got[] (when TDM_OK). */
static tdm_status full_match(const char *pattern, int n, const char *const *s, int *got)
{
    gr_model *m;
    gr_graph *g;
    int idx;
    const char *in[1] = {"x"}, *out[1] = {"y"};
    if (gr_model_new(NULL, &m) || gr_graph_new(NULL, m, NULL, "g", &g) ||
        gr_node_add(NULL, g, "n", "RegexFullMatch", "", 1, in, 1, out, &idx))
        exit(1);
    gr_attr *a = gr_attr_add(NULL, g, idx, "pattern");
    a->type = GA_STRING;
    a->s = mem_strdup(pattern);
    a->s_len = strlen(pattern);
    tdm_tensor *x, *y = mem_calloc(1, sizeof *y);
    if (tensor_new(NULL, TDM_STRING, 1, (int64_t[]){n}, &x) || !y)
        exit(1);
    for (int i = 0; i < n; i++)
        ((char **)x->data)[i] = mem_strdup(s[i]);
    const tdm_tensor *ins[1] = {x};
    op_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.node = &g->nodes[idx];
    ctx.version = 20;
    ctx.n_in = 1;
    ctx.in = ins;
    ctx.n_out = 1;
    ctx.out = &y;
    ctx.err = &err;
    ctx.threads = 1;
    err_clear(&err);
    tdm_status st = op_run_RegexFullMatch(&ctx);
    if (!st) {
        if (y->dtype != TDM_BOOL || y->count != (size_t)n) {
            printf("FAIL '%s': the output is not %d booleans\n", pattern, n);
            failures++;
        } else {
            for (int i = 0; i < n; i++)
                got[i] = ((uint8_t *)y->data)[i];
        }
    }
    tdm_tensor_destroy(x);
    tdm_tensor_destroy(y);
    gr_graph_free(g);
    gr_model_free(m);
    return st;
}

static void expect(const char *pattern, int n, const char *const *s, const int *want)
{
    int got[8] = {0};
    tdm_status st = full_match(pattern, n, s, got);
    if (st) {
        printf("FAIL '%s': %s\n", pattern, err.msg);
        failures++;
        return;
    }
    for (int i = 0; i < n; i++)
        if (got[i] != want[i]) {
            printf("FAIL '%s' on \"%s\": %d, want %d\n", pattern, s[i], got[i], want[i]);
            failures++;
        }
}

static void refused(const char *pattern, const char *s, const char *words)
{
    int got[1];
    tdm_status st = full_match(pattern, 1, (const char *const[]){s}, got);
    if (st != TDM_E_UNSUPPORTED || !strstr(err.msg, words)) {
        printf("FAIL '%s' on \"%s\": status %d (%s), want a refusal naming '%s'\n", pattern, s, (int)st, err.msg,
               words);
        failures++;
    }
}

int main(void)
{
    /* want: Python 3.11 re.fullmatch */
    expect("www\\.[\\w.-]+\\.\\bcom\\b", 3, (const char *const[]){"www.google.com", "www.bbc.co.uk", "www..com"},
           (const int[]){1, 0, 0});
    expect("(\\W|^)[\\w.\\-]{0,25}@(yahoo|gmail)\\.com(\\W|$)", 3,
           (const char *const[]){"account@gmail.com", "a@hotmail.com", "x-y.z@yahoo.com"}, (const int[]){1, 0, 1});
    expect("\\d{3}-\\d{4}", 3, (const char *const[]){"555-1234", "55-1234", "555-12345"}, (const int[]){1, 0, 0});
    /* RE2's . does not match a newline, a negated bracket does */
    expect("a.c", 3, (const char *const[]){"abc", "a\nc", "ac"}, (const int[]){1, 0, 0});
    expect("[^a]b", 3, (const char *const[]){"\nb", "ab", "xb"}, (const int[]){1, 0, 1});
    /* a lazy quantifier and a non-capturing group */
    expect("(?:ab)+?", 3, (const char *const[]){"abab", "aba", ""}, (const int[]){1, 0, 0});
    /* escapes inside a bracket: ] \ ^ - */
    expect("[\\]\\\\^-]+", 2, (const char *const[]){"]\\^-", "a"}, (const int[]){1, 0});
    expect("\\s*\\S+\\s*", 2, (const char *const[]){"  word ", "two words"}, (const int[]){1, 0});
    /* what POSIX cannot say as RE2 does, or RE2 and Python read apart */
    refused("(?i)abc", "ABC", "flags");
    refused("\\x41", "A", "escape");
    refused("[[:alpha:]]+", "abc", "class");
    refused("x{,2}", "xx", "brace");
    refused("[^\\W]", "a", "bracket");
    refused("a.c", "a\xc3\xa9" "c", "ASCII");
    if (failures)
        printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
