/* tdm_session_options_bind through the public API (ctest rescue.bind):
 *   test_bind MODEL INPUTS_DIR
 * silero_vad with sr bound to 16000 on vnpu:rk3588,cpu (static shapes,
 * granularity op): the plan has no If left on top and nodes on the
 * device; a run that omits sr (NULL) equals one that gives 16000; a run
 * giving 8000 is refused with TDM_E_INPUT naming sr; a bind to a name that
 * is not an input, or of another element type, fails the session with
 * TDM_E_INPUT. Exit 77 when the model is absent. */
#include <tandem/tandem.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int failures;

#define CHECK(c, ...)                                                                                              \
    do {                                                                                                           \
        if (!(c)) {                                                                                                \
            failures++;                                                                                            \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                            \
        } else {                                                                                                   \
            printf("ok   ");                                                                                       \
        }                                                                                                          \
        printf(__VA_ARGS__);                                                                                       \
        printf("\n");                                                                                              \
    } while (0)

static tdm_tensor *scalar_i64(int64_t v)
{
    tdm_tensor *t = NULL;
    if (tdm_tensor_create(TDM_INT64, 0, NULL, &t) == TDM_OK)
        *(int64_t *)tdm_tensor_data(t) = v;
    return t;
}

static tdm_session_options *options(const char *name, const tdm_tensor *v)
{
    tdm_session_options *o = NULL;
    int64_t in[2] = {1, 576}, st[3] = {2, 1, 128};
    if (tdm_session_options_create(&o) != TDM_OK)
        return NULL;
    tdm_session_options_set_devices(o, "vnpu:rk3588,cpu");
    tdm_session_options_set_granularity(o, TDM_GRANULARITY_OP);
    tdm_session_options_set_shape(o, "input", 2, in);
    tdm_session_options_set_shape(o, "state", 3, st);
    if (name && tdm_session_options_bind(o, name, v) != TDM_OK) {
        tdm_session_options_destroy(o);
        return NULL;
    }
    return o;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    if (access(argv[1], R_OK) != 0) {
        printf("%s is absent\n", argv[1]);
        return 77;
    }
    tdm_ctx *ctx = NULL;
    tdm_model *m = NULL;
    tdm_tensor *in[3] = {NULL, NULL, NULL}, *a[2] = {NULL, NULL}, *b[2] = {NULL, NULL}, *c[2] = {NULL, NULL};
    char path[1024];
    const char *names[2] = {"input", "state"};
    if (tdm_ctx_create(&ctx) != TDM_OK || tdm_model_load(ctx, argv[1], &m) != TDM_OK)
        return 1;
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s.npy", argv[2], names[k]);
        if (tdm_value_load(ctx, path, NULL, &in[k]) != TDM_OK)
            return 1;
    }
    tdm_tensor *sr16 = scalar_i64(16000), *sr8 = scalar_i64(8000);
    tdm_session_options *o = options("sr", sr16);
    tdm_session *s = NULL;
    tdm_status st = tdm_session_create(ctx, m, o, &s);
    CHECK(st == TDM_OK, "session with sr bound: %s", st ? tdm_ctx_error(ctx) : "made");
    if (s) {
        tdm_plan *p = NULL;
        CHECK(tdm_plan_create(ctx, m, o, &p) == TDM_OK, "plan with sr bound");
        size_t on = p ? tdm_plan_device_nodes(p, 0) : 0;
        CHECK(on >= 30, "%zu nodes on %s", on, p ? tdm_plan_device_name(p, 0) : "?");
        tdm_plan_destroy(p);
        const tdm_tensor *omit[3] = {in[0], in[1], NULL}, *give[3] = {in[0], in[1], sr16}, *other[3] = {in[0], in[1], sr8};
        CHECK(tdm_session_run(s, omit, a) == TDM_OK, "run omitting sr: %s", tdm_session_error(s));
        CHECK(tdm_session_run(s, give, b) == TDM_OK, "run giving sr=16000: %s", tdm_session_error(s));
        int same = a[0] && b[0] && a[1] && b[1];
        for (int k = 0; same && k < 2; k++)
            same = tdm_tensor_nbytes(a[k]) == tdm_tensor_nbytes(b[k]) &&
                   memcmp(tdm_tensor_cdata(a[k]), tdm_tensor_cdata(b[k]), tdm_tensor_nbytes(a[k])) == 0;
        CHECK(same, "omitted and given sr give the same outputs");
        st = tdm_session_run(s, other, c);
        CHECK(st == TDM_E_INPUT && strstr(tdm_session_error(s), "'sr'") && strstr(tdm_session_error(s), "8000"),
              "sr=8000 refused: %s", tdm_session_error(s));
        CHECK(!c[0] && !c[1], "no output set on the refused run");
    }
    tdm_session_destroy(s);
    tdm_session_options_destroy(o);
    /* not an input */
    o = options("rate", sr16);
    s = NULL;
    st = tdm_session_create(ctx, m, o, &s);
    CHECK(st == TDM_E_INPUT && strstr(tdm_ctx_error(ctx), "'rate'") && strstr(tdm_ctx_error(ctx), "sr"),
          "bind to 'rate': %s", tdm_ctx_error(ctx));
    tdm_session_destroy(s);
    tdm_session_options_destroy(o);
    /* another element type */
    tdm_tensor *f = NULL;
    tdm_tensor_create(TDM_FLOAT, 0, NULL, &f);
    o = options("sr", f);
    s = NULL;
    st = tdm_session_create(ctx, m, o, &s);
    CHECK(st == TDM_E_INPUT && strstr(tdm_ctx_error(ctx), "int64"), "bind of a float to sr: %s", tdm_ctx_error(ctx));
    tdm_session_destroy(s);
    tdm_session_options_destroy(o);
    CHECK(tdm_session_options_bind(NULL, "sr", sr16) == TDM_E_USAGE, "NULL options: TDM_E_USAGE");
    for (int k = 0; k < 2; k++) {
        tdm_tensor_destroy(a[k]);
        tdm_tensor_destroy(b[k]);
        tdm_tensor_destroy(in[k]);
    }
    tdm_tensor_destroy(f);
    tdm_tensor_destroy(sr16);
    tdm_tensor_destroy(sr8);
    tdm_model_destroy(m);
    tdm_ctx_destroy(ctx);
    printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
