/* The words of the session options' choices (src/core/choice.c, tandem.h
 * "session options"): every word parses to its enum and back, a refused
 * word leaves the sentence on the ctx (and *out unchanged), the setters
 * take the enums and refuse values out of range, and a plan's verdict is
 * its status and sentence (tdm_plan_status, tdm_plan_error). */
#include <tandem/tandem.h>

#include <stdio.h>
#include <string.h>

static int failures;

#define CHECK(cond, ...)                                                                                              \
    do {                                                                                                              \
        if (!(cond)) {                                                                                                \
            failures++;                                                                                               \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                      \
            fprintf(stderr, __VA_ARGS__);                                                                             \
            fputc('\n', stderr);                                                                                      \
        }                                                                                                             \
    } while (0)

int main(void)
{
    tdm_ctx *ctx = NULL;
    tdm_session_options *o = NULL;
    if (tdm_ctx_create(&ctx) != TDM_OK || tdm_session_options_create(&o) != TDM_OK)
        return 1;

    static const char *const grans[] = {"op", "subgraph", "graph", "auto", "greedy"};
    for (int k = 0; k < 5; k++) {
        tdm_granularity g = (tdm_granularity)-1;
        CHECK(tdm_granularity_parse(ctx, grans[k], &g) == TDM_OK && (int)g == k, "granularity %s", grans[k]);
        CHECK(strcmp(tdm_granularity_name(g), grans[k]) == 0 && !tdm_ctx_error(ctx)[0], "name of %d", k);
        CHECK(tdm_session_options_set_granularity(o, g) == TDM_OK, "set granularity %s", grans[k]);
    }
    static const char *const fbs[] = {"allow", "deny", "deny-compute"};
    for (int k = 0; k < 3; k++) {
        tdm_fallback_mode f = (tdm_fallback_mode)-1;
        CHECK(tdm_fallback_mode_parse(ctx, fbs[k], &f) == TDM_OK && (int)f == k, "fallback %s", fbs[k]);
        CHECK(strcmp(tdm_fallback_mode_name(f), fbs[k]) == 0, "name of %d", k);
        CHECK(tdm_session_options_set_fallback(o, f) == TDM_OK, "set fallback %s", fbs[k]);
    }
    static const char *const fus[] = {"off", "on", "observed"};
    for (int k = 0; k < 3; k++) {
        tdm_fusion f = (tdm_fusion)-1;
        CHECK(tdm_fusion_parse(ctx, fus[k], &f) == TDM_OK && (int)f == k, "fusion %s", fus[k]);
        CHECK(strcmp(tdm_fusion_name(f), fus[k]) == 0, "name of %d", k);
        CHECK(tdm_session_options_set_fusion(o, f) == TDM_OK, "set fusion %s", fus[k]);
    }
    CHECK(TDM_FUSION_OFF == 0 && TDM_FUSION_ON == 1 && TDM_FUSION_OBSERVED == 2, "fusion numbers");

    tdm_verify_mode m = (tdm_verify_mode)-1;
    int every = -1;
    CHECK(tdm_verify_mode_parse(ctx, "first", &m, &every) == TDM_OK && m == TDM_VERIFY_FIRST && every == 0, "first");
    CHECK(tdm_verify_mode_parse(ctx, "off", &m, &every) == TDM_OK && m == TDM_VERIFY_OFF && every == 0, "off");
    CHECK(tdm_verify_mode_parse(ctx, "every:7", &m, &every) == TDM_OK && m == TDM_VERIFY_EVERY && every == 7,
          "every:7 -> %d %d", (int)m, every);
    CHECK(strcmp(tdm_verify_mode_name(TDM_VERIFY_EVERY), "every") == 0, "name of every");
    CHECK(tdm_session_options_set_verify(o, TDM_VERIFY_EVERY, 7) == TDM_OK, "set every 7");
    CHECK(tdm_session_options_set_verify(o, TDM_VERIFY_FIRST, 0) == TDM_OK, "set first");
    static const char *const bad_verify[] = {"every", "every:", "every:0", "every:x", "every:3x", "First", ""};
    for (size_t k = 0; k < sizeof bad_verify / sizeof *bad_verify; k++) {
        m = TDM_VERIFY_FIRST;
        every = 5;
        CHECK(tdm_verify_mode_parse(ctx, bad_verify[k], &m, &every) == TDM_E_USAGE && m == TDM_VERIFY_FIRST &&
                  every == 5 && strstr(tdm_ctx_error(ctx), "every:N"),
              "verify '%s' refused: %s", bad_verify[k], tdm_ctx_error(ctx));
    }

    /* a refused word: the sentence quotes it and lists the words; *out unchanged */
    tdm_granularity g = TDM_GRANULARITY_AUTO;
    CHECK(tdm_granularity_parse(ctx, "sub-graph", &g) == TDM_E_USAGE && g == TDM_GRANULARITY_AUTO, "sub-graph");
    CHECK(strcmp(tdm_ctx_error(ctx), "'sub-graph' is not a granularity (op, subgraph, graph, auto or greedy)") == 0,
          "sentence: %s", tdm_ctx_error(ctx));
    tdm_fallback_mode f = TDM_FALLBACK_DENY;
    CHECK(tdm_fallback_mode_parse(ctx, "DENY", &f) == TDM_E_USAGE && f == TDM_FALLBACK_DENY &&
              strstr(tdm_ctx_error(ctx), "'DENY' is not a fallback mode (allow, deny or deny-compute)"),
          "DENY: %s", tdm_ctx_error(ctx));
    tdm_fusion u = TDM_FUSION_ON;
    CHECK(tdm_fusion_parse(ctx, "1", &u) == TDM_E_USAGE && u == TDM_FUSION_ON && strstr(tdm_ctx_error(ctx), "'1'"),
          "fusion 1: %s", tdm_ctx_error(ctx));
    /* a success clears the ctx's sentence; a NULL ctx or word is a status only */
    CHECK(tdm_fusion_parse(ctx, "off", &u) == TDM_OK && !tdm_ctx_error(ctx)[0], "cleared: %s", tdm_ctx_error(ctx));
    CHECK(tdm_fusion_parse(NULL, "sideways", &u) == TDM_E_USAGE && u == TDM_FUSION_OFF, "NULL ctx");
    CHECK(tdm_granularity_parse(ctx, NULL, &g) == TDM_E_USAGE, "NULL word");
    CHECK(strcmp(tdm_granularity_name((tdm_granularity)9), "?") == 0, "name out of range");

    /* the setters refuse values out of their enums */
    CHECK(tdm_session_options_set_granularity(o, (tdm_granularity)5) == TDM_E_USAGE, "granularity 5");
    CHECK(tdm_session_options_set_granularity(o, (tdm_granularity)-1) == TDM_E_USAGE, "granularity -1");
    CHECK(tdm_session_options_set_fallback(o, (tdm_fallback_mode)3) == TDM_E_USAGE, "fallback 3");
    CHECK(tdm_session_options_set_fusion(o, (tdm_fusion)3) == TDM_E_USAGE, "fusion 3");
    CHECK(tdm_session_options_set_verify(o, TDM_VERIFY_EVERY, 0) == TDM_E_USAGE, "every 0");
    CHECK(tdm_session_options_set_verify(o, TDM_VERIFY_FIRST, 3) == TDM_E_USAGE, "first with 3");
    CHECK(tdm_session_options_set_verify(o, (tdm_verify_mode)3, 0) == TDM_E_USAGE, "verify 3");
    CHECK(tdm_session_options_set_granularity(NULL, TDM_GRANULARITY_OP) == TDM_E_USAGE, "NULL opts");

    /* a plan's verdict without a plan */
    CHECK(tdm_plan_status(NULL) == TDM_E_USAGE && !tdm_plan_error(NULL)[0], "NULL plan");

    tdm_session_options_destroy(o);
    tdm_ctx_destroy(ctx);
    if (failures)
        fprintf(stderr, "%d failure(s)\n", failures);
    else
        printf("choices: all words, refusals and setters as declared\n");
    return failures != 0;
}
