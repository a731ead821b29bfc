/* Map values (TDM_KIND_MAP, tandem.h "values"): tdm_map_create takes 1-D
 * int64 or string keys and 1-D values of one length and owns them, also
 * when it refuses; tdm_map_keys/values read them back; a clone and a
 * sequence of maps own their maps. With a model argument (a ZipMap with
 * string labels a, b, c over x [N, 3], loader.generate's
 * maps/zipmap_strings.onnx), a run's output is a sequence of N maps read
 * through the same accessors. Run under ASan to check ownership. */
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

static tdm_tensor *vec(tdm_dtype dt, int64_t n)
{
    tdm_tensor *t = NULL;
    tdm_tensor_create(dt, 1, &n, &t);
    return t;
}

static void t_accessors(void)
{
    tdm_tensor *k = vec(TDM_INT64, 3), *v = vec(TDM_FLOAT, 3), *m = NULL, *c = NULL;
    for (int i = 0; i < 3; i++) {
        ((int64_t *)tdm_tensor_data(k))[i] = 10 * i;
        ((float *)tdm_tensor_data(v))[i] = 0.5f * (float)i;
    }
    CHECK(tdm_map_create(k, v, &m) == TDM_OK && m, "int64 map");
    CHECK(tdm_tensor_kind(m) == TDM_KIND_MAP && tdm_tensor_dtype(m) == TDM_FLOAT, "kind map of float values");
    CHECK(tdm_map_keys(m) == k && tdm_map_values(m) == v, "keys and values are the ones given");
    CHECK(tdm_tensor_count(m) == 0 && tdm_tensor_nbytes(m) == 0 && tdm_sequence_length(m) == 0,
          "a map has no elements of its own");
    CHECK(tdm_tensor_clone(m, &c) == TDM_OK && c && tdm_tensor_kind(c) == TDM_KIND_MAP, "clone");
    CHECK(c && tdm_map_keys(c) != k && ((const int64_t *)tdm_tensor_cdata(tdm_map_keys(c)))[2] == 20 &&
              ((const float *)tdm_tensor_cdata(tdm_map_values(c)))[1] == 0.5f,
          "the clone copies keys and values");
    CHECK(tdm_map_keys(k) == NULL && tdm_map_values(NULL) == NULL, "accessors of a non-map");

    tdm_tensor *seq = NULL;
    CHECK(tdm_sequence_create(TDM_FLOAT, &seq) == TDM_OK, "sequence");
    CHECK(tdm_sequence_append(seq, m) == TDM_OK && tdm_sequence_append(seq, c) == TDM_OK, "append two maps");
    tdm_tensor *sc = NULL;
    CHECK(tdm_tensor_clone(seq, &sc) == TDM_OK && tdm_sequence_length(sc) == 2, "clone of a sequence of maps");
    CHECK(sc && tdm_tensor_kind(tdm_sequence_item(sc, 1)) == TDM_KIND_MAP &&
              tdm_tensor_count(tdm_map_keys(tdm_sequence_item(sc, 1))) == 3,
          "its items are maps");
    tdm_tensor_destroy(sc);
    tdm_tensor_destroy(seq);

    /* string keys */
    tdm_tensor *sk = vec(TDM_STRING, 2), *sv = vec(TDM_FLOAT, 2), *sm = NULL;
    tdm_tensor_set_string(sk, 0, "cat", 3);
    tdm_tensor_set_string(sk, 1, "dog", 3);
    CHECK(tdm_map_create(sk, sv, &sm) == TDM_OK && sm, "string map");
    CHECK(sm && strcmp(((char *const *)tdm_tensor_cdata(tdm_map_keys(sm)))[1], "dog") == 0, "string key read back");
    tdm_tensor_destroy(sm);

    /* refused: each call owns (frees) what it was given */
    tdm_tensor *out = (tdm_tensor *)&out;
    CHECK(tdm_map_create(vec(TDM_INT64, 2), vec(TDM_FLOAT, 3), &out) == TDM_E_USAGE && out == NULL, "lengths");
    CHECK(tdm_map_create(vec(TDM_FLOAT, 2), vec(TDM_FLOAT, 2), &out) == TDM_E_USAGE, "float keys");
    int64_t d2[2] = {1, 2};
    tdm_tensor *k2 = NULL;
    tdm_tensor_create(TDM_INT64, 2, d2, &k2);
    CHECK(tdm_map_create(k2, vec(TDM_FLOAT, 2), &out) == TDM_E_USAGE, "2-D keys");
    CHECK(tdm_map_create(NULL, vec(TDM_FLOAT, 2), &out) == TDM_E_USAGE, "no keys");
    CHECK(tdm_map_create(vec(TDM_INT64, 1), vec(TDM_FLOAT, 1), NULL) == TDM_E_USAGE, "no out");
}

static void t_run(const char *path)
{
    tdm_ctx *ctx = NULL;
    tdm_model *model = NULL;
    tdm_session *s = NULL;
    if (tdm_ctx_create(&ctx) != TDM_OK)
        return;
    CHECK(tdm_model_load(ctx, path, &model) == TDM_OK, "%s: %s", path, tdm_ctx_error(ctx));
    CHECK(!model || tdm_model_output_map_key(model, 0) == TDM_STRING, "output 0 is a sequence of string-keyed maps");
    if (model && tdm_session_create(ctx, model, NULL, &s) == TDM_OK) {
        int64_t dims[2] = {2, 3};
        tdm_tensor *x = NULL, *z = NULL;
        tdm_tensor_create(TDM_FLOAT, 2, dims, &x);
        for (int i = 0; i < 6; i++)
            ((float *)tdm_tensor_data(x))[i] = (float)i / 8;
        const tdm_tensor *ins[1] = {x};
        CHECK(tdm_session_run(s, ins, &z) == TDM_OK, "run: %s", tdm_session_error(s));
        CHECK(z && tdm_tensor_kind(z) == TDM_KIND_SEQUENCE && tdm_sequence_length(z) == 2, "two maps");
        for (size_t r = 0; z && r < tdm_sequence_length(z); r++) {
            const tdm_tensor *m = tdm_sequence_item(z, r);
            const tdm_tensor *k = tdm_map_keys(m), *v = tdm_map_values(m);
            CHECK(k && v && tdm_tensor_dtype(k) == TDM_STRING && tdm_tensor_count(v) == 3, "map %zu", r);
            for (int i = 0; k && v && i < 3; i++) {
                char want[2] = {(char)('a' + i), 0};
                CHECK(strcmp(((char *const *)tdm_tensor_cdata(k))[i], want) == 0 &&
                          ((const float *)tdm_tensor_cdata(v))[i] == (float)(3 * (int)r + i) / 8,
                      "map %zu entry %d", r, i);
            }
        }
        tdm_tensor_destroy(x);
        tdm_tensor_destroy(z);
    } else {
        CHECK(0, "session: %s", tdm_ctx_error(ctx));
    }
    tdm_session_destroy(s);
    tdm_model_destroy(model);
    tdm_ctx_destroy(ctx);
}

int main(int argc, char **argv)
{
    t_accessors();
    if (argc > 1)
        t_run(argv[1]);
    printf("core.map: %d failure%s\n", failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
