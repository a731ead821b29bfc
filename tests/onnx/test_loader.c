/* Unit tests of the ONNX loader (src/onnx) through onnx_load_file,
 * onnx_load_memory and onnx_read_value.
 *
 * Usage: test_loader GROUP DATADIR [TMPDIR]
 *   GROUP: dtypes features external malformed deep values memory nomem
 *          truncate MODEL (a real model, cut at several points; exits 77
 *          when MODEL is absent)
 * DATADIR is where gen_models.py wrote its files. */
#define _POSIX_C_SOURCE 200809L
#include "core/file.h"
#include "core/mem.h"
#include "graph/model.h"
#include "onnx/onnx.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static int n_pass, n_fail;
static const char *data_dir, *tmp_dir;

static void check(int ok, int line, const char *fmt, ...)
{
    if (ok) {
        n_pass++;
        return;
    }
    n_fail++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL (line %d): ", line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
#define CHECK(c, ...) check(!!(c), __LINE__, __VA_ARGS__)

static char *path_of(const char *rel)
{
    static char buf[8][1024];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 1024, "%s/%s", data_dir, rel);
    return p;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(sz > 0 ? (size_t)sz : 1);
    *n = fread(b, 1, (size_t)sz, f);
    fclose(f);
    return b;
}

static gr_model *load_ok(const char *path)
{
    tdm_err e;
    err_clear(&e);
    gr_model *m = NULL;
    double t0 = now();
    tdm_status st = onnx_load_file(&e, path, &m);
    CHECK(st == TDM_OK && m, "%s should load: %s (%s)", path, e.msg, tdm_status_str(st));
    CHECK(now() - t0 < 1.0, "%s took %.2f s", path, now() - t0);
    return st == TDM_OK ? m : NULL;
}

/* The sentence must carry the status, name the file and hold frag. */
static void check_err(const tdm_err *e, tdm_status got, tdm_status want, const char *fname, const char *frag,
                      const char *what, int line)
{
    check(got == want, line, "%s: status %s, expected %s (%s)", what, tdm_status_str(got), tdm_status_str(want),
          e->msg);
    check(e->status == got, line, "%s: tdm_err holds %s, returned %s", what, tdm_status_str(e->status),
          tdm_status_str(got));
    check(strstr(e->msg, fname) != NULL, line, "%s: sentence does not name '%s': %s", what, fname, e->msg);
    check(!frag || strstr(e->msg, frag) != NULL, line, "%s: sentence lacks '%s': %s", what, frag, e->msg);
    check(strlen(e->msg) <= 240 && !strchr(e->msg, '\n'), line, "%s: sentence too long (%zu): %s", what,
          strlen(e->msg), e->msg);
}

static void expect_fail_at(const char *rel, tdm_status want, const char *frag, int line)
{
    tdm_err e;
    err_clear(&e);
    gr_model *m = NULL;
    const char *p = path_of(rel);
    double t0 = now();
    tdm_status st = onnx_load_file(&e, p, &m);
    double dt = now() - t0;
    check(m == NULL, line, "%s: model returned on failure", rel);
    gr_model_free(m);
    const char *base = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
    check_err(&e, st, want, base, frag, rel, line);
    check(dt < 1.0, line, "%s took %.2f s", rel, dt);
}
#define EXPECT_FAIL(rel, st, frag) expect_fail_at(rel, st, frag, __LINE__)

static const gr_value *value(const gr_graph *g, const char *name)
{
    int id = gr_value_find(g, name);
    return id >= 0 ? &g->values[id] : NULL;
}

static const gr_node *node(const gr_graph *g, const char *name)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i].name, name) == 0)
            return &g->nodes[i];
    return NULL;
}

static int hexval(int c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

static size_t unhex(const char *s, unsigned char *out, size_t cap)
{
    size_t n = 0;
    if (strcmp(s, "-") == 0)
        return 0;
    for (; s[0] && s[1] && n < cap; s += 2)
        out[n++] = (unsigned char)(hexval(s[0]) * 16 + hexval(s[1]));
    return n;
}

/* ------------------------------------------------------------------ dtypes */

static void t_dtypes(void)
{
    gr_model *m = load_ok(path_of("dtypes.onnx"));
    if (!m)
        return;
    const gr_graph *g = m->main;
    FILE *f = fopen(path_of("dtypes.expect"), "r");
    CHECK(f != NULL, "dtypes.expect missing");
    if (!f) {
        gr_model_free(m);
        return;
    }
    char line[4096];
    int seen[TDM_DTYPE_COUNT] = {0}, lines = 0;
    while (fgets(line, sizeof line, f)) {
        char name[128], dims_s[256], hex[2048];
        int dt;
        if (sscanf(line, "%127s %d %255s %2047s", name, &dt, dims_s, hex) != 4)
            continue;
        lines++;
        const gr_value *v = value(g, name);
        CHECK(v && v->init && v->is_initializer && !v->is_input, "%s: no initializer", name);
        if (!v || !v->init)
            continue;
        const tdm_tensor *t = v->init;
        int64_t dims[TDM_MAX_RANK];
        int rank = 0;
        if (strcmp(dims_s, "-") != 0)
            for (char *p = dims_s; p && *p && rank < TDM_MAX_RANK; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
                dims[rank++] = strtoll(p, NULL, 10);
        CHECK(t->kind == TDM_KIND_TENSOR && (int)t->dtype == dt, "%s: dtype %d, expected %d", name, t->dtype, dt);
        CHECK(shape_equal(t->rank, t->dims, rank, dims), "%s: wrong shape (rank %d)", name, t->rank);
        CHECK(v->has_type && v->type.dtype == t->dtype && v->type.rank == t->rank, "%s: value type not set", name);
        if (dt > 0 && dt < TDM_DTYPE_COUNT)
            seen[dt] = 1;
        if (dt == TDM_STRING) {
            /* s:hex,hex,… */
            char *p = hex + 2;
            size_t i = 0;
            while (p && *p) {
                char *comma = strchr(p, ',');
                if (comma)
                    *comma = '\0';
                unsigned char want[256];
                size_t n = unhex(p, want, sizeof want);
                const char *got = i < t->count ? tensor_str(t, i) : "";
                CHECK(i < t->count && strlen(got) == n && memcmp(got, want, n) == 0, "%s: string %zu differs", name,
                      i);
                i++;
                p = comma ? comma + 1 : NULL;
            }
            CHECK(i == t->count, "%s: %zu strings, expected %zu", name, t->count, i);
            continue;
        }
        unsigned char want[1024];
        size_t n = unhex(hex, want, sizeof want);
        CHECK(t->nbytes == n, "%s: %zu bytes, expected %zu", name, t->nbytes, n);
        CHECK(t->data && (n == 0 || memcmp(t->data, want, n) == 0), "%s: data differs", name);
    }
    fclose(f);
    CHECK(lines > 40, "dtypes.expect has %d lines", lines);
    for (int dt = 1; dt < TDM_DTYPE_COUNT; dt++)
        CHECK(seen[dt], "element type %d (%s) not covered", dt, tdm_dtype_name((tdm_dtype)dt));
    CHECK(g->n_inputs == 1 && strcmp(g->values[g->inputs[0]].name, "x") == 0, "inputs should be only x");
    gr_model_free(m);
}

/* ------------------------------------------------------------------ features */

static void check_float_tensor(const tdm_tensor *t, int n, const float *want, const char *what)
{
    CHECK(t && t->dtype == TDM_FLOAT && (int)t->count == n, "%s: not a float tensor of %d", what, n);
    if (!t || t->dtype != TDM_FLOAT || (int)t->count != n)
        return;
    CHECK(memcmp(t->data, want, (size_t)n * sizeof(float)) == 0, "%s: values differ", what);
}

/* seq(map(K, float)) graph outputs (ZipMap's): declared or inferred, read
 * through the public API; other key and value types refused. */
static void t_maps(void)
{
    tdm_ctx *ctx = NULL;
    tdm_model *m = NULL;
    char buf[128];
    CHECK(tdm_ctx_create(&ctx) == TDM_OK, "ctx");
    if (!ctx)
        return;
    static const struct {
        const char *file;
        tdm_dtype key;
        const char *type;
    } ok[] = {{"maps/zipmap_strings.onnx", TDM_STRING, "seq map(string,float)"},
              {"maps/zipmap_int64_inferred.onnx", TDM_INT64, NULL}}; /* typed by inference only */
    for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++) {
        tdm_value_info vi;
        tdm_status st = tdm_model_load(ctx, path_of(ok[k].file), &m);
        CHECK(st == TDM_OK, "%s should load: %s", ok[k].file, tdm_ctx_error(ctx));
        if (st)
            continue;
        CHECK(tdm_model_output(m, 0, &vi) == TDM_OK && vi.kind == TDM_KIND_SEQUENCE && vi.dtype == TDM_FLOAT,
              "%s: output z is a sequence of float-valued maps", ok[k].file);
        CHECK(tdm_model_output_map_key(m, 0) == ok[k].key, "%s: key type %d", ok[k].file,
              (int)tdm_model_output_map_key(m, 0));
        CHECK(tdm_model_output_map_key(m, 1) == TDM_UNDEFINED && tdm_model_output_map_key(NULL, 0) == TDM_UNDEFINED,
              "map key of a bad argument");
        tdm_model_destroy(m);
        m = NULL;
        if (!ok[k].type)
            continue;
        gr_model *g = load_ok(path_of(ok[k].file));
        const gr_value *z = g ? value(g->main, "z") : NULL;
        CHECK(z && strcmp(gr_type_str(&z->type, buf, sizeof buf), ok[k].type) == 0, "%s: z typed '%s'", ok[k].file,
              z ? buf : "(none)");
        gr_model_free(g);
    }
    EXPECT_FAIL("maps/bad_key_int32.onnx", TDM_E_UNSUPPORTED, "graph output 'z' is a sequence of maps with int32 keys");
    EXPECT_FAIL("maps/bad_value_string.onnx", TDM_E_UNSUPPORTED, "whose values are not numbers");
    tdm_ctx_destroy(ctx);
}

static void t_features(void)
{
    gr_model *m = load_ok(path_of("features.onnx"));
    if (!m)
        return;
    CHECK(m->ir_version == 8, "ir_version %lld", (long long)m->ir_version);
    CHECK(strcmp(m->producer_name, "gen_models") == 0 && strcmp(m->producer_version, "1.2") == 0, "producer");
    CHECK(strcmp(m->domain, "org.test") == 0 && m->model_version == 42, "domain / model_version");
    CHECK(strcmp(m->doc, "model doc") == 0, "doc '%s'", m->doc);
    CHECK(m->n_opsets == 2 && gr_opset_version(m, "") == 17 && gr_opset_version(m, "ai.onnx") == 17 &&
              gr_opset_version(m, "com.test") == 2,
          "opsets");
    CHECK(m->n_metadata == 2 && strcmp(m->metadata[0].key, "author") == 0 &&
              strcmp(m->metadata[0].value, "loader") == 0 && strcmp(m->metadata[1].key, "purpose") == 0 &&
              strcmp(m->metadata[1].value, "tests") == 0,
          "metadata");
    CHECK(m->path && strstr(m->path, "features.onnx") && m->dir && strcmp(m->dir, data_dir) == 0, "path/dir");

    const gr_graph *g = m->main;
    CHECK(g->name && strcmp(g->name, "features") == 0 && g->parent == NULL && g->depth == 0, "main graph");
    static const char *const ins[] = {"x", "cond", "trip", "s", "o"};
    CHECK(g->n_inputs == 5, "%d inputs (initializer w must be excluded)", g->n_inputs);
    for (int i = 0; i < g->n_inputs && i < 5; i++)
        CHECK(strcmp(g->values[g->inputs[i]].name, ins[i]) == 0 && g->values[g->inputs[i]].is_input, "input %d", i);
    const gr_value *w = value(g, "w");
    CHECK(w && w->init && w->is_initializer && !w->is_input && w->init->rank == 2 && w->init->dims[0] == 3,
          "w is an initializer, not an input");
    const char *N = gr_intern(m, "N");
    const gr_value *x = value(g, "x");
    CHECK(x && x->has_type && x->type.kind == TDM_KIND_TENSOR && x->type.dtype == TDM_FLOAT && x->type.rank == 2 &&
              x->type.dims[0].v == -1 && x->type.dims[0].sym == N && x->type.dims[1].v == 3 &&
              x->type.dims[1].sym == NULL,
          "x type float [N,3]");
    const gr_value *s = value(g, "s");
    CHECK(s && s->has_type && s->type.kind == TDM_KIND_SEQUENCE && s->type.dtype == TDM_INT64 && s->type.rank == 1 &&
              s->type.dims[0].v == 2 && !s->type.optional,
          "s type sequence(int64 [2])");
    const gr_value *o = value(g, "o");
    CHECK(o && o->has_type && o->type.kind == TDM_KIND_TENSOR && o->type.optional && o->type.dtype == TDM_FLOAT &&
              o->type.rank == -1,
          "o type optional(float)");
    const gr_value *c = value(g, "cond");
    CHECK(c && c->type.dtype == TDM_BOOL && c->type.rank == 0, "cond scalar bool");
    CHECK(g->n_outputs == 2 && strcmp(g->values[g->outputs[0]].name, "y") == 0 &&
              strcmp(g->values[g->outputs[1]].name, "if_out") == 0 && g->values[g->outputs[0]].is_output,
          "outputs");
    const gr_value *mid = value(g, "mid");
    CHECK(mid && mid->has_type && mid->type.rank == 2 && mid->type.dims[0].sym == N && mid->type.dims[1].v == -1 &&
              mid->type.dims[1].sym == NULL,
          "value_info mid [N,?]");
    const gr_value *gout = value(g, "g_out");
    CHECK(gout && gout->has_type && gout->type.rank == 2 && gout->type.dims[0].v == -1 && gout->type.dims[1].v == 3,
          "value_info g_out");
    const gr_value *sp = value(g, "sp");
    static const float spv[] = {0, 5, 0, 0, 6, 0};
    CHECK(sp && sp->is_initializer && sp->init && sp->init->rank == 2 && sp->init->dims[1] == 3,
          "sparse initializer sp [2,3]");
    if (sp)
        check_float_tensor(sp->init, 6, spv, "sparse initializer sp");

    CHECK(g->n_nodes == 6, "%d nodes", g->n_nodes);
    const gr_node *gemm = node(g, "gemm");
    CHECK(gemm && strcmp(gemm->op_type, "Gemm") == 0 && strcmp(gemm->domain, "") == 0 && gemm->n_inputs == 3 &&
              gemm->inputs[2] == -1 && gemm->inputs[1] == gr_value_find(g, "w") && gemm->n_outputs == 1 &&
              gemm->outputs[0] == gr_value_find(g, "g_out"),
          "gemm node");
    if (gemm)
        CHECK(gr_attr_float(gemm, "alpha", 0) == 1.0f && gr_attr_int(gemm, "transB", 0) == 1, "gemm attributes");
    CHECK(g->nodes[4].name[0] && strcmp(g->nodes[4].op_type, "Relu") == 0, "unnamed node gets a name");

    const gr_node *ifn = node(g, "if");
    const gr_attr *tb = ifn ? gr_attr_find(ifn, "then_branch") : NULL;
    const gr_attr *eb = ifn ? gr_attr_find(ifn, "else_branch") : NULL;
    CHECK(tb && tb->type == GA_GRAPH && tb->g && eb && eb->type == GA_GRAPH && eb->g, "if branches");
    if (tb && tb->g) {
        const gr_graph *sg = tb->g;
        CHECK(sg->parent == g && sg->depth == 1 && sg->model == m && strcmp(sg->name, "then_branch") == 0,
              "then_branch parent/depth");
        const gr_value *tc = value(sg, "tc");
        CHECK(tc && tc->is_initializer && tc->init, "subgraph initializer tc");
        CHECK(sg->n_inputs == 0 && sg->n_outputs == 1 && node(sg, "then_add"), "then_branch io/nodes");
        const gr_value *sx = value(sg, "x");
        CHECK(sx && !sx->init && !sx->is_input, "outer value x referenced in the subgraph");
    }
    const gr_node *loop = node(g, "loop");
    const gr_attr *body = loop ? gr_attr_find(loop, "body") : NULL;
    CHECK(body && body->type == GA_GRAPH && body->g && body->g->n_inputs == 3 && body->g->n_outputs == 2,
          "loop body");
    if (body && body->g) {
        const gr_node *bif = node(body->g, "body_if");
        const gr_attr *it = bif ? gr_attr_find(bif, "then_branch") : NULL;
        CHECK(it && it->g && it->g->depth == 2 && it->g->parent == body->g, "nested subgraph depth 2");
        const gr_value *iter = value(body->g, "iter");
        CHECK(iter && iter->is_input && iter->type.dtype == TDM_INT64 && iter->type.rank == 0, "body input iter");
    }

    const gr_node *cu = node(g, "custom");
    CHECK(cu && strcmp(cu->domain, "com.test") == 0 && cu->doc && strcmp(cu->doc, "a custom node") == 0,
          "custom node domain/doc");
    if (cu) {
        const gr_attr *a;
        CHECK((a = gr_attr_find(cu, "f")) && a->type == GA_FLOAT && a->f == 0.5f, "attr f");
        CHECK((a = gr_attr_find(cu, "i")) && a->type == GA_INT && a->i == -7, "attr i");
        CHECK((a = gr_attr_find(cu, "s")) && a->type == GA_STRING && a->s_len == 4 && strcmp(a->s, "text") == 0,
              "attr s");
        CHECK((a = gr_attr_find(cu, "t")) && a->type == GA_TENSOR && a->t && a->t->dtype == TDM_INT64 &&
                  a->t->count == 2 && ((int64_t *)a->t->data)[0] == 3 && ((int64_t *)a->t->data)[1] == 4,
              "attr t");
        const float *fl;
        CHECK(gr_attr_floats(cu, "floats", &fl) == 2 && fl[0] == 1.0f && fl[1] == 2.5f, "attr floats");
        const int64_t *iv;
        CHECK(gr_attr_ints(cu, "ints", &iv) == 3 && iv[0] == 1 && iv[1] == -2 && iv[2] == 3, "attr ints");
        CHECK(gr_attr_ints(cu, "empty_ints", &iv) == 0, "attr empty_ints");
        CHECK((a = gr_attr_find(cu, "strings")) && a->type == GA_STRINGS && a->n == 2 &&
                  strcmp(a->strings[0], "a") == 0 && strcmp(a->strings[1], "bc") == 0 && a->string_lens[1] == 2,
              "attr strings");
        CHECK((a = gr_attr_find(cu, "tensors")) && a->type == GA_TENSORS && a->n == 2 &&
                  a->tensors[0]->dtype == TDM_FLOAT && a->tensors[1]->dtype == TDM_INT32 &&
                  ((int32_t *)a->tensors[1]->data)[1] == 6,
              "attr tensors");
        CHECK((a = gr_attr_find(cu, "graphs")) && a->type == GA_GRAPHS && a->n == 1 && a->graphs[0] &&
                  a->graphs[0]->parent == g,
              "attr graphs");
        CHECK((a = gr_attr_find(cu, "sp")) && a->type == GA_SPARSE_TENSOR && a->t && a->t->dtype == TDM_INT64 &&
                  a->t->count == 4 && ((int64_t *)a->t->data)[2] == 9 && ((int64_t *)a->t->data)[0] == 0,
              "attr sparse tensor (2-D indices)");
        CHECK((a = gr_attr_find(cu, "tp")) && a->type == GA_TYPE_PROTO && a->tp.optional &&
                  a->tp.kind == TDM_KIND_TENSOR && a->tp.dtype == TDM_FLOAT && a->tp.rank == 1 &&
                  a->tp.dims[0].sym == gr_intern(m, "B"),
              "attr type proto");
    }
    gr_model_free(m);

    m = load_ok(path_of("opset_alias.onnx"));
    if (m) {
        CHECK(m->ir_version == 3, "IR 3");
        CHECK(m->n_opsets == 2 && strcmp(m->opsets[0].domain, "") == 0 && m->opsets[0].version == 13 &&
                  gr_opset_version(m, "ai.onnx.ml") == 3,
              "'ai.onnx' is the default domain");
        const gr_value *xv = value(m->main, "x");
        CHECK(m->main->n_inputs == 0 && xv && xv->is_initializer && !xv->is_input,
              "IR 3: an input with an initializer is not a graph input");
        gr_model_free(m);
    }
}

/* ------------------------------------------------------------------ external */

/* 1 when the n floats at p (read as bytes: they may lie misaligned in a
 * mapping) are i * 0.5 + k (gen_models.py, external "mapped"). */
static int ramp_at(const void *p, size_t n, float k)
{
    for (size_t i = 0; i < n; i++) {
        float f;
        memcpy(&f, (const char *)p + i * sizeof f, sizeof f);
        if (f != (float)i * 0.5f + k)
            return 0;
    }
    return 1;
}

static int ramp(const tdm_tensor *t, size_t n, float k)
{
    return t && t->dtype == TDM_FLOAT && t->count == n && t->data && ramp_at(t->data, n, k);
}

/* Resident KiB of the mapping that holds p (/proc/self/smaps), -1 when
 * none is found. */
static long resident_kib(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int in = 0;
    long kib = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, ' ') && line[0] != 'R') {
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
            continue;
        }
        if (in && sscanf(line, "Rss: %ld kB", &kib) == 1)
            break;
    }
    fclose(f);
    return kib;
}

/* External data and raw_data of 4 KiB or more stay in a read-only
 * mapping of the file (tdm_tensor.map), also where they are not aligned
 * for their type (skew and inline_skew: aligned on demand, see
 * t_misaligned); the rest is read. Values are the file's either way, also after the pages have been
 * dropped (tensor_drop_pages) and in a clone of the model, which shares the
 * mapping. */
/* ext/mapped's tensors: name (NULL: skew_name.txt's), elements, ramp, and
 * whether the loader maps them. */
static const struct {
    const char *name;
    size_t n;
    float k;
    int mapped;
} mapped_want[] = {{"big", 4096, 1, 1},    {"odd", 2048, 2, 1},    {"skew", 1500, 3, 1},
                   {"small", 4, 4, 0},     {"inline", 2048, 5, 1}, {NULL, 1200, -1000, 1}};

/* The name of ext/mapped's inline_skew (its length puts the raw_data where
 * the test wants it: gen_models.py). */
static void read_skew_name(char *buf, size_t size)
{
    FILE *f = fopen(path_of("ext/mapped/skew_name.txt"), "r");
    buf[0] = 0;
    if (f) {
        if (!fgets(buf, (int)size, f))
            buf[0] = 0;
        fclose(f);
    }
}

static void t_mapped(void)
{
    gr_model *m = load_ok(path_of("ext/mapped/model.onnx"));
    if (!m)
        return;
    char skew_name[32];
    read_skew_name(skew_name, sizeof skew_name);
    for (size_t i = 0; i < sizeof mapped_want / sizeof mapped_want[0]; i++) {
        const char *name = mapped_want[i].name ? mapped_want[i].name : skew_name;
        const gr_value *v = value(m->main, name);
        const tdm_tensor *t = v ? v->init : NULL;
        CHECK(ramp(t, mapped_want[i].n, mapped_want[i].k), "mapped: '%s' holds the file's values", name);
        if (!t)
            continue;
        CHECK(!!t->map == mapped_want[i].mapped, "mapped: %s %s", name,
              mapped_want[i].mapped ? "is in a mapping" : "is read (not mapped)");
        long before = t->map ? resident_kib(t->data) : 0;
        tensor_drop_pages(t);
        if (t->map && t->nbytes >= 8192) /* a page wholly inside it, at least */
            CHECK(before > 0 && resident_kib(t->data) < before, "mapped: %s: %ld KiB resident, fewer after the drop",
                  name, before);
        CHECK(ramp(t, mapped_want[i].n, mapped_want[i].k), "mapped: %s reads back after its pages were dropped", name);
    }
    tdm_err e;
    err_clear(&e);
    gr_model *c = NULL;
    CHECK(gr_model_clone(&e, m, &c) == TDM_OK, "mapped: clone");
    gr_model_free(m); /* the clone's tensors keep the mappings */
    if (c) {
        const gr_value *v = value(c->main, "big");
        CHECK(v && v->init && v->init->map && ramp(v->init, 4096, 1), "mapped: the clone shares big's mapping");
        v = value(c->main, "small");
        /* small was read into the heap: the clone shares that block (the
         * model it came from is freed above), and its pages are never dropped */
        CHECK(v && v->init && v->init->map && v->init->map->heap && ramp(v->init, 4, 4),
              "mapped: the clone shares small's heap block");
        if (v && v->init) {
            tensor_drop_pages(v->init);
            CHECK(ramp(v->init, 4, 4), "mapped: small keeps its values after a drop");
        }
        v = value(c->main, "skew");
        CHECK(v && v->init && v->init->map && !v->init->map->heap && tensor_misaligned(v->init) &&
                  ramp(v->init, 1500, 3), "mapped: the clone shares skew's mapping, misaligned");
        gr_model_free(c);
    }
}

/* A tensor whose bytes lie misaligned in the mapping (skew: external data
 * at an odd offset; inline_skew: raw_data inside the protobuf) is not
 * copied at load: tensor_align makes one aligned copy, with the same
 * bytes, on demand and t->data points to it from then on (its pages are
 * then no longer the file's: never dropped); tensor_read_aligned makes a
 * temporary one; a view made after the copy reads the mapping, and
 * outlives its owner. */
static void t_misaligned(void)
{
    gr_model *m = load_ok(path_of("ext/mapped/model.onnx"));
    if (!m)
        return;
    char skew_name[32];
    read_skew_name(skew_name, sizeof skew_name);
    const struct {
        const char *name;
        size_t n;
        float k;
    } want[] = {{"skew", 1500, 3}, {skew_name, 1200, -1000}};
    tdm_tensor *views[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        const gr_value *v = value(m->main, want[i].name);
        const tdm_tensor *t = v ? v->init : NULL;
        CHECK(t && tensor_misaligned(t) && tensor_in_file(t) && !t->aligned,
              "misaligned: '%s' lies misaligned in the mapping, not copied", want[i].name);
        if (!t)
            continue;
        const void *at = t->data;
        void *tmp = NULL;
        const void *r = tensor_read_aligned(t, &tmp);
        CHECK(r && tmp == r && (uintptr_t)r % 4 == 0 && ramp_at(r, want[i].n, want[i].k) && t->data == at &&
                  !t->aligned, "misaligned: %s: a temporary aligned copy, the tensor unchanged", want[i].name);
        mem_free(tmp);
        tensor_drop_pages(t); /* the file's pages: read in again below */
        const void *a = tensor_align(t);
        CHECK(a && (uintptr_t)a % 4 == 0 && a == t->data && a == t->aligned && !tensor_misaligned(t) &&
                  ramp(t, want[i].n, want[i].k) && t->in_map == at,
              "misaligned: %s: aligned once, the same bytes", want[i].name);
        CHECK(tensor_align(t) == a, "misaligned: %s: aligned again, the same copy", want[i].name);
        CHECK(!tensor_in_file(t), "misaligned: %s: the copy is not the file's", want[i].name);
        tensor_drop_pages(t); /* nothing: heap pages are never dropped */
        CHECK(ramp(t, want[i].n, want[i].k), "misaligned: %s: the copy keeps its values after a drop", want[i].name);
        tdm_err e;
        err_clear(&e);
        CHECK(tensor_view(&e, t, &views[i]) == TDM_OK && views[i]->data == at && !views[i]->aligned &&
                  tensor_misaligned(views[i]), "misaligned: %s: a view reads the mapping", want[i].name);
    }
    gr_model_free(m);
    for (int i = 0; i < 2; i++) {
        CHECK(!views[i] || ramp_at(views[i]->data, want[i].n, want[i].k),
              "misaligned: %s: the view outlives its model", want[i].name);
        const void *a = views[i] ? tensor_align(views[i]) : NULL;
        CHECK(!views[i] || (a && (uintptr_t)a % 4 == 0 && ramp(views[i], want[i].n, want[i].k)),
              "misaligned: %s: the view aligns on its own", want[i].name);
        tdm_tensor_destroy(views[i]);
    }
}

/* TANDEM_MMAP=0: the same file, every tensor read into memory. */
static void t_mapped_off(void)
{
    setenv("TANDEM_MMAP", "0", 1);
    gr_model *m = load_ok(path_of("ext/mapped/model.onnx"));
    unsetenv("TANDEM_MMAP");
    if (!m)
        return;
    for (size_t i = 0; i < sizeof mapped_want / sizeof mapped_want[0]; i++) {
        if (!mapped_want[i].mapped || !mapped_want[i].name)
            continue; /* the ones the default maps (inline_skew's name is the file's) */
        const gr_value *v = value(m->main, mapped_want[i].name);
        const tdm_tensor *t = v ? v->init : NULL;
        CHECK(t && !t->map && ramp(t, mapped_want[i].n, mapped_want[i].k), "TANDEM_MMAP=0: %s is read, not mapped, with the file's values",
              mapped_want[i].name);
    }
    gr_model_free(m);
}

static void t_external(void)
{
    gr_model *m = load_ok(path_of("ext/ok/model.onnx"));
    if (m) {
        static const float w1[] = {0, 1, 2, 3, 4, 5};
        const gr_value *v = value(m->main, "w1");
        check_float_tensor(v ? v->init : NULL, 6, w1, "external w1");
        v = value(m->main, "w2");
        CHECK(v && v->init && v->init->dtype == TDM_INT32 && v->init->count == 4 &&
                  ((int32_t *)v->init->data)[0] == 7 && ((int32_t *)v->init->data)[1] == -8,
              "external w2 (sub folder, offset)");
        v = value(m->main, "w3");
        CHECK(v && v->init && v->init->dtype == TDM_INT64 && ((int64_t *)v->init->data)[0] == 123456789,
              "external w3 (no length)");
        gr_model_free(m);
    }
    m = load_ok(path_of("ext/symlink_in/model.onnx"));
    gr_model_free(m);
    t_mapped();
    t_misaligned();
    t_mapped_off();
    EXPECT_FAIL("ext/absolute/model.onnx", TDM_E_MODEL, "absolute path");
    EXPECT_FAIL("ext/dotdot/model.onnx", TDM_E_MODEL, "leaves the model's folder");
    EXPECT_FAIL("ext/dotdot_inner/model.onnx", TDM_E_MODEL, "leaves the model's folder");
    EXPECT_FAIL("ext/symlink_out/model.onnx", TDM_E_MODEL, "resolves outside the model's folder");
    EXPECT_FAIL("ext/missing/model.onnx", TDM_E_IO, "'nothere.bin', which does not exist");
    EXPECT_FAIL("ext/past_end/model.onnx", TDM_E_MODEL, "past the end");
    EXPECT_FAIL("ext/offset_past_end/model.onnx", TDM_E_MODEL, "offset 4096 past the end");
    EXPECT_FAIL("ext/bad_length/model.onnx", TDM_E_MODEL, "initializer 'w1' has 20 bytes of external data");
    EXPECT_FAIL("ext/bad_offset/model.onnx", TDM_E_MODEL, "not a number");
    EXPECT_FAIL("ext/no_location/model.onnx", TDM_E_MODEL, "without a location");

    /* from memory there is no folder: external data is refused */
    size_t n;
    unsigned char *b = slurp(path_of("ext/ok/model.onnx"), &n);
    CHECK(b != NULL, "read ext/ok/model.onnx");
    if (b) {
        tdm_err e;
        err_clear(&e);
        gr_model *mm = NULL;
        tdm_status st = onnx_load_memory(&e, b, n, "mem.onnx", &mm);
        check_err(&e, st, TDM_E_UNSUPPORTED, "mem.onnx", "initializer 'w1' uses external data", "memory external",
                  __LINE__);
        gr_model_free(mm);
        free(b);
    }
}

/* ------------------------------------------------------------------ malformed */

static void t_malformed(void)
{
    EXPECT_FAIL("bad/empty.onnx", TDM_E_MODEL, "is empty");
    EXPECT_FAIL("bad/random.onnx", TDM_E_MODEL, "is not an ONNX model");
    EXPECT_FAIL("bad/text.onnx", TDM_E_MODEL, "is not an ONNX model");
    EXPECT_FAIL("bad/rawlen.onnx", TDM_E_MODEL,
                "rawlen.onnx: initializer 'fc.weight' has 20 bytes of raw_data, its dims 2x3 of float need 24");
    EXPECT_FAIL("bad/typedlen.onnx", TDM_E_MODEL, "initializer 'w' has 5 values of float_data, its dims 2x3");
    EXPECT_FAIL("bad/overflow.onnx", TDM_E_MODEL, "initializer 'huge' has dims 4611686018427387904x");
    EXPECT_FAIL("bad/overflow_size.onnx", TDM_E_MODEL, "overflows");
    EXPECT_FAIL("bad/negdim.onnx", TDM_E_MODEL, "initializer 'neg' has a negative dimension (-1 at axis 0)");
    EXPECT_FAIL("bad/rank17.onnx", TDM_E_UNSUPPORTED, "initializer 'r17' has rank 17");
    EXPECT_FAIL("bad/nodtype.onnx", TDM_E_MODEL, "initializer 'nodt' has no data_type");
    EXPECT_FAIL("bad/dtype99.onnx", TDM_E_UNSUPPORTED, "element type 99");
    EXPECT_FAIL("bad/string_raw.onnx", TDM_E_MODEL, "string tensor with raw_data");
    EXPECT_FAIL("bad/dup_init.onnx", TDM_E_MODEL, "initializer 'w' is listed twice");
    EXPECT_FAIL("bad/noname_init.onnx", TDM_E_MODEL, "has no name");
    EXPECT_FAIL("bad/dup_opset.onnx", TDM_E_MODEL, "imports opset domain 'ai.onnx' twice");
    EXPECT_FAIL("bad/dup_attr.onnx", TDM_E_MODEL, "node 'id' has attribute 'a' twice");
    EXPECT_FAIL("bad/no_op_type.onnx", TDM_E_MODEL, "has no op_type");
    EXPECT_FAIL("bad/map_input.onnx", TDM_E_UNSUPPORTED, "graph input 'x' holds maps");
    EXPECT_FAIL("bad/nograph.onnx", TDM_E_MODEL, "has no graph");
    EXPECT_FAIL("bad/no_ir_version.onnx", TDM_E_MODEL, "ir_version is missing");
    EXPECT_FAIL("bad/no_opset.onnx", TDM_E_MODEL, "no opset_import");
    EXPECT_FAIL("bad/sparse_oob.onnx", TDM_E_MODEL, "outside its dims 2x3");
    EXPECT_FAIL("bad/sparse_huge.onnx", TDM_E_UNSUPPORTED, "over 1 GiB once dense");
    EXPECT_FAIL("bad/does_not_exist.onnx", TDM_E_IO, "does_not_exist.onnx' does not exist");
    EXPECT_FAIL("bad", TDM_E_IO, "is a folder");
}

/* Cuts the model at several points: each cut must fail cleanly, from a file
 * and from memory. */
static void truncate_model(const char *path)
{
    size_t n;
    unsigned char *b = slurp(path, &n);
    CHECK(b != NULL && n > 100, "cannot read %s", path);
    if (!b)
        return;
    size_t cuts[] = {1, 2, 3, 7, 16, n / 10, n / 3, n / 2, n * 9 / 10, n - 64, n - 2, n - 1};
    char tpath[1024];
    snprintf(tpath, sizeof tpath, "%s/truncated.onnx", tmp_dir);
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        size_t cut = cuts[k];
        for (int from_file = 0; from_file < 2; from_file++) {
            tdm_err e;
            err_clear(&e);
            gr_model *m = NULL;
            tdm_status st;
            double t0 = now();
            if (from_file) {
                FILE *f = fopen(tpath, "wb");
                fwrite(b, 1, cut, f);
                fclose(f);
                st = onnx_load_file(&e, tpath, &m);
            } else {
                st = onnx_load_memory(&e, b, cut, "cut.onnx", &m);
            }
            const char *fname = from_file ? "truncated.onnx" : "cut.onnx";
            char what[128];
            snprintf(what, sizeof what, "%s cut at %zu of %zu (%s)", path, cut, n, from_file ? "file" : "memory");
            CHECK(st != TDM_OK && m == NULL, "%s loaded", what);
            gr_model_free(m);
            /* a cut between fields leaves well-formed protobuf without the
             * later fields: then it is the missing field that is named */
            const char *frag = strstr(e.msg, "protobuf decoding failed") ? "is not an ONNX model"
                               : strstr(e.msg, "has no graph")          ? "has no graph"
                                                                         : "no opset_import";
            check_err(&e, st, TDM_E_MODEL, fname, frag, what, __LINE__);
            CHECK(now() - t0 < 1.0, "%s took %.2f s", what, now() - t0);
        }
    }
    remove(tpath);
    free(b);
}

/* ------------------------------------------------------------------ deep nesting */

/* Protobuf written back to front: nested messages are built inside out. */
typedef struct pw {
    unsigned char *buf;
    size_t cap, start;
} pw;

static void pw_init(pw *w, size_t cap)
{
    w->buf = malloc(cap);
    w->cap = cap;
    w->start = cap;
}
static size_t pw_len(const pw *w) { return w->cap - w->start; }
static void pw_raw(pw *w, const void *p, size_t n)
{
    if (n > w->start)
        abort(); /* the test sized its buffer wrong */
    w->start -= n;
    memcpy(w->buf + w->start, p, n);
}
static void pw_varint(pw *w, uint64_t v)
{
    unsigned char tmp[10];
    int n = 0;
    do {
        tmp[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    pw_raw(w, tmp, (size_t)n);
}
/* Prepends the header of a length-delimited field whose payload is the
 * len bytes already written in front. */
static void pw_wrap(pw *w, unsigned field, size_t len)
{
    pw_varint(w, len);
    pw_varint(w, (uint64_t)field << 3 | 2);
}
static void pw_string(pw *w, unsigned field, const char *s)
{
    pw_raw(w, s, strlen(s));
    pw_wrap(w, field, strlen(s));
}
static void pw_int(pw *w, unsigned field, uint64_t v)
{
    pw_varint(w, v);
    pw_varint(w, (uint64_t)field << 3);
}
/* ModelProto around the GraphProto already written. */
static void pw_model(pw *w)
{
    pw_wrap(w, 7, pw_len(w));
    size_t mark = pw_len(w);
    pw_int(w, 2, 17);
    pw_wrap(w, 8, pw_len(w) - mark);
    pw_int(w, 1, 8);
}

/* A model whose main graph holds `depth` levels of If subgraphs. */
static void nested_graphs(pw *w, int depth)
{
    pw_init(w, 64 + (size_t)depth * 48);
    pw_string(w, 2, "leaf");
    for (int i = 0; i < depth; i++) {
        size_t g = pw_len(w);
        pw_wrap(w, 6, g);            /* AttributeProto.g */
        pw_int(w, 20, 5);            /* type GRAPH */
        pw_string(w, 1, "then_branch");
        size_t a = pw_len(w);
        pw_wrap(w, 5, a);            /* NodeProto.attribute */
        pw_string(w, 4, "If");
        size_t n = pw_len(w);
        pw_wrap(w, 1, n);            /* GraphProto.node */
    }
    pw_model(w);
}

static void expect_mem_fail(const pw *w, const char *name, tdm_status want, const char *frag, int line)
{
    tdm_err e;
    err_clear(&e);
    gr_model *m = NULL;
    double t0 = now();
    tdm_status st = onnx_load_memory(&e, w->buf + w->start, pw_len(w), name, &m);
    check(m == NULL, line, "%s: loaded", name);
    gr_model_free(m);
    check_err(&e, st, want, name, frag, name, line);
    check(now() - t0 < 1.0, line, "%s took %.2f s", name, now() - t0);
}

static void t_deep(void)
{
    pw w;
    /* 64 levels below the main graph are allowed, 65 are not */
    nested_graphs(&w, 64);
    tdm_err e;
    err_clear(&e);
    gr_model *m = NULL;
    tdm_status st = onnx_load_memory(&e, w.buf + w.start, pw_len(&w), "deep64.onnx", &m);
    CHECK(st == TDM_OK && m, "64 nested subgraphs should load: %s", e.msg);
    if (m) {
        const gr_graph *g = m->main;
        int depth = 0;
        while (g && g->n_nodes == 1 && g->nodes[0].n_attrs == 1) {
            g = g->nodes[0].attrs[0].g;
            depth++;
        }
        CHECK(depth == 64 && g && g->depth == 64 && strcmp(g->name, "leaf") == 0, "nesting depth %d", depth);
    }
    gr_model_free(m);
    free(w.buf);

    nested_graphs(&w, 65);
    expect_mem_fail(&w, "deep65.onnx", TDM_E_UNSUPPORTED, "nests subgraphs more than 64 deep", __LINE__);
    free(w.buf);
    nested_graphs(&w, 5000);
    expect_mem_fail(&w, "deep5000.onnx", TDM_E_UNSUPPORTED, "nests subgraphs more than 64 deep", __LINE__);
    /* the same from a file */
    char path[1024];
    snprintf(path, sizeof path, "%s/deep5000.onnx", tmp_dir);
    FILE *f = fopen(path, "wb");
    fwrite(w.buf + w.start, 1, pw_len(&w), f);
    fclose(f);
    err_clear(&e);
    st = onnx_load_file(&e, path, &m);
    check_err(&e, st, TDM_E_UNSUPPORTED, "deep5000.onnx", "nests subgraphs", "deep5000 file", __LINE__);
    gr_model_free(m);
    remove(path);
    free(w.buf);

    /* nested sequence types on a graph input: 126 levels is as deep as
     * protobuf-c is allowed to recurse (the deepest message at level 256),
     * 127 and 100000 are refused before it sees them */
    static const int type_levels[] = {126, 127, 100000};
    for (int k = 0; k < 3; k++) {
        int levels = type_levels[k];
        pw_init(&w, 64 + (size_t)levels * 8);
        pw_int(&w, 1, 1);                 /* Tensor.elem_type = FLOAT */
        pw_wrap(&w, 1, pw_len(&w));       /* TypeProto.tensor_type */
        for (int i = 0; i < levels; i++) {
            pw_wrap(&w, 1, pw_len(&w));   /* Sequence.elem_type */
            pw_wrap(&w, 4, pw_len(&w));   /* TypeProto.sequence_type */
        }
        pw_wrap(&w, 2, pw_len(&w));       /* ValueInfoProto.type */
        pw_string(&w, 1, "x");
        pw_wrap(&w, 11, pw_len(&w));      /* GraphProto.input */
        pw_model(&w);
        if (k == 0)
            expect_mem_fail(&w, "deeptype.onnx", TDM_E_UNSUPPORTED, "graph input 'x' is a sequence of sequences",
                            __LINE__);
        else
            expect_mem_fail(&w, "deeptype.onnx", TDM_E_UNSUPPORTED, "nests protobuf messages more than", __LINE__);
        free(w.buf);
    }

    int levels = 100000;
    /* a SequenceProto nested 100000 deep, as a value file */
    pw_init(&w, 64 + (size_t)levels * 8);
    pw_int(&w, 2, 1);
    for (int i = 0; i < levels; i++) {
        pw_wrap(&w, 5, pw_len(&w));   /* SequenceProto.sequence_values */
        pw_int(&w, 2, 3);
    }
    tdm_tensor *v = NULL;
    tdm_kind sk = TDM_KIND_SEQUENCE;
    err_clear(&e);
    double t0 = now();
    st = onnx_read_value_memory(&e, w.buf + w.start, pw_len(&w), "deepseq.pb", &sk, &v);
    CHECK(v == NULL, "deep sequence returned a value");
    check_err(&e, st, TDM_E_UNSUPPORTED, "deepseq.pb", "too deep", "deepseq", __LINE__);
    CHECK(now() - t0 < 1.0, "deep sequence took %.2f s", now() - t0);
    err_clear(&e);
    st = onnx_read_value_memory(&e, w.buf + w.start, pw_len(&w), "deepseq.pb", NULL, &v);
    CHECK(st != TDM_OK && v == NULL && strstr(e.msg, "deepseq.pb"), "deep sequence (auto) must fail: %s", e.msg);
    free(w.buf);
}

/* ------------------------------------------------------------------ values */

static tdm_tensor *read_ok(const char *rel, const tdm_kind *expect)
{
    tdm_err e;
    err_clear(&e);
    tdm_tensor *t = NULL;
    tdm_status st = onnx_read_value(&e, path_of(rel), expect, &t);
    CHECK(st == TDM_OK && t, "%s should read: %s", rel, e.msg);
    return t;
}

static void read_fail(const char *rel, const tdm_kind *expect, tdm_status want, const char *frag, int line)
{
    tdm_err e;
    err_clear(&e);
    tdm_tensor *t = NULL;
    const char *p = path_of(rel);
    tdm_status st = onnx_read_value(&e, p, expect, &t);
    check(t == NULL, line, "%s returned a value", rel);
    tdm_tensor_destroy(t);
    check_err(&e, st, want, strrchr(p, '/') + 1, frag, rel, line);
}

/* A value declared optional(k), from bytes. */
static tdm_tensor *read_mem(const pw *w, tdm_kind k, tdm_status want, const char *frag, int line)
{
    tdm_err e;
    err_clear(&e);
    tdm_tensor *t = NULL;
    tdm_status st = onnx_read_optional_memory(&e, w->buf + w->start, pw_len(w), "v.pb", k, &t);
    check(st == want && (st != TDM_OK) == (t == NULL), line, "status %s (%s), expected %s", tdm_status_str(st),
          e.msg, tdm_status_str(want));
    if (frag)
        check(strstr(e.msg, frag) && strstr(e.msg, "v.pb"), line, "'%s' lacks '%s'", e.msg, frag);
    return t;
}

/* A value declared optional(tensor) or optional(sequence), stored as the
 * node tests store it (an OptionalProto) or as the plain message. */
static tdm_tensor *read_opt(const char *rel, tdm_kind k)
{
    tdm_err e;
    err_clear(&e);
    tdm_tensor *t = NULL;
    tdm_status st = onnx_read_optional(&e, path_of(rel), k, &t);
    CHECK(st == TDM_OK && t, "%s should read as optional(%s): %s", rel, k ? "sequence" : "tensor", e.msg);
    return t;
}

static void t_values_optional(void)
{
    const tdm_kind ks = TDM_KIND_SEQUENCE;
    tdm_tensor *t = read_opt("values/opt_tensor.pb", TDM_KIND_TENSOR);
    CHECK(t && t->kind == TDM_KIND_TENSOR && t->dtype == TDM_INT32 && t->count == 3 && ((int32_t *)t->data)[2] == 9,
          "opt_tensor.pb as optional(tensor)");
    tdm_tensor_destroy(t);
    t = read_opt("values/opt_empty.pb", TDM_KIND_TENSOR);
    CHECK(t && t->kind == TDM_KIND_NONE, "opt_empty.pb as optional(tensor) is none");
    tdm_tensor_destroy(t);
    t = read_opt("values/opt_seq.pb", TDM_KIND_SEQUENCE);
    CHECK(t && t->kind == TDM_KIND_SEQUENCE && t->n_items == 2 && t->dtype == TDM_INT64,
          "opt_seq.pb as optional(sequence)");
    tdm_tensor_destroy(t);
    /* the plain messages, for an optional declared input */
    t = read_opt("values/tensor.pb", TDM_KIND_TENSOR);
    CHECK(t && t->kind == TDM_KIND_TENSOR && t->count == 4, "tensor.pb as optional(tensor)");
    tdm_tensor_destroy(t);
    t = read_opt("values/seq.pb", TDM_KIND_SEQUENCE);
    CHECK(t && t->kind == TDM_KIND_SEQUENCE && t->n_items == 2, "seq.pb as optional(sequence)");
    tdm_tensor_destroy(t);
    t = read_opt("values/seq_empty.pb", TDM_KIND_SEQUENCE);
    CHECK(t && t->kind == TDM_KIND_SEQUENCE && t->n_items == 0, "seq_empty.pb is not taken for an absent optional");
    tdm_tensor_destroy(t);
    /* Not declared optional: a sequence of one sequence is refused, not
     * taken for an optional of a sequence (the same bytes). */
    read_fail("values/seq_nested.pb", &ks, TDM_E_UNSUPPORTED, "sequence of sequences", __LINE__);
    tdm_err e;
    err_clear(&e);
    t = NULL;
    tdm_status st = onnx_read_optional(&e, path_of("values/opt_seq.pb"), TDM_KIND_TENSOR, &t);
    CHECK(st == TDM_E_INPUT && !t && strstr(e.msg, "opt_seq.pb"), "opt_seq.pb as optional(tensor): %s", e.msg);
    tdm_tensor_destroy(t);

    pw w;
    /* absent, as onnx 1.12 writes it (test_optional_has_element_empty):
     * name, elem_type UNDEFINED */
    for (int k = 0; k < 2; k++) {
        pw_init(&w, 64);
        pw_int(&w, 2, 0);
        pw_string(&w, 1, "optional_input");
        t = read_mem(&w, k ? TDM_KIND_SEQUENCE : TDM_KIND_TENSOR, TDM_OK, NULL, __LINE__);
        CHECK(t && t->kind == TDM_KIND_NONE, "absent optional (elem_type 0) as %s", k ? "sequence" : "tensor");
        tdm_tensor_destroy(t);
        free(w.buf);
    }
    /* absent optional(sequence), elem_type SEQUENCE, no name */
    pw_init(&w, 16);
    pw_int(&w, 2, 3);
    t = read_mem(&w, TDM_KIND_SEQUENCE, TDM_OK, NULL, __LINE__);
    CHECK(t && t->kind == TDM_KIND_NONE, "absent optional(sequence)");
    tdm_tensor_destroy(t);
    free(w.buf);
    /* a float scalar TensorProto {data_type, name, raw_data}: field 8 and 9
     * are not an OptionalProto's, so it stays a tensor */
    pw_init(&w, 64);
    pw_raw(&w, "\0\0\200?", 4);
    pw_wrap(&w, 9, 4);
    pw_string(&w, 8, "s");
    pw_int(&w, 2, 1);
    t = read_mem(&w, TDM_KIND_TENSOR, TDM_OK, NULL, __LINE__);
    CHECK(t && t->kind == TDM_KIND_TENSOR && t->rank == 0 && ((float *)t->data)[0] == 1.0f, "scalar TensorProto");
    tdm_tensor_destroy(t);
    free(w.buf);
    /* an optional holding two tensors is no optional: read as a
     * TensorProto it has a segment, refused */
    pw_init(&w, 64);
    for (int k = 0; k < 2; k++) {
        size_t m = pw_len(&w);
        pw_int(&w, 2, 1);
        pw_int(&w, 1, 0);
        pw_wrap(&w, 3, pw_len(&w) - m);
    }
    pw_int(&w, 2, 1);
    tdm_tensor_destroy(read_mem(&w, TDM_KIND_TENSOR, TDM_E_UNSUPPORTED, "segment", __LINE__));
    free(w.buf);
    /* optional(sequence) holding a sequence of sequences: one sentence */
    pw_init(&w, 64);
    size_t m = pw_len(&w);
    pw_int(&w, 2, 1);
    pw_wrap(&w, 5, pw_len(&w) - m);  /* SequenceProto.sequence_values */
    pw_int(&w, 2, 3);
    pw_wrap(&w, 5, pw_len(&w) - m);  /* OptionalProto.sequence_value */
    pw_int(&w, 2, 3);
    tdm_tensor_destroy(read_mem(&w, TDM_KIND_SEQUENCE, TDM_E_UNSUPPORTED,
                                "holds a sequence of sequences; tandem supports sequences of tensors", __LINE__));
    free(w.buf);
}

static void t_values(void)
{
    const tdm_kind kt = TDM_KIND_TENSOR, ks = TDM_KIND_SEQUENCE, ko = TDM_KIND_NONE;
    static const float x[] = {1, 2, 3, 4};
    for (int k = 0; k < 2; k++) {
        tdm_tensor *t = read_ok("values/tensor.pb", k ? &kt : NULL);
        if (t) {
            CHECK(t->kind == TDM_KIND_TENSOR && t->rank == 2 && t->dims[0] == 2, "tensor.pb shape");
            check_float_tensor(t, 4, x, "tensor.pb");
        }
        tdm_tensor_destroy(t);
    }
    tdm_tensor *t = read_ok("values/strings.pb", NULL);
    CHECK(t && t->dtype == TDM_STRING && t->count == 3 && strcmp(tensor_str(t, 0), "ab") == 0 &&
              strcmp(tensor_str(t, 1), "") == 0 && strcmp(tensor_str(t, 2), "cde") == 0,
          "strings.pb");
    tdm_tensor_destroy(t);
    for (int k = 0; k < 2; k++) {
        t = read_ok("values/seq.pb", k ? &ks : NULL);
        CHECK(t && t->kind == TDM_KIND_SEQUENCE && t->dtype == TDM_INT64 && t->n_items == 2 &&
                  t->items[1]->count == 3 && ((int64_t *)t->items[1]->data)[2] == 5,
              "seq.pb (%s)", k ? "expected" : "detected");
        tdm_tensor_destroy(t);
    }
    t = read_ok("values/seq_empty.pb", &ks);
    CHECK(t && t->kind == TDM_KIND_SEQUENCE && t->n_items == 0, "seq_empty.pb");
    tdm_tensor_destroy(t);
    t = read_ok("values/opt_tensor.pb", &ko);
    CHECK(t && t->kind == TDM_KIND_TENSOR && t->dtype == TDM_INT32 && t->count == 3 && ((int32_t *)t->data)[2] == 9,
          "opt_tensor.pb");
    tdm_tensor_destroy(t);
    t = read_ok("values/opt_empty.pb", &ko);
    CHECK(t && t->kind == TDM_KIND_NONE, "opt_empty.pb is none");
    tdm_tensor_destroy(t);
    t = read_ok("values/opt_seq.pb", &ko);
    CHECK(t && t->kind == TDM_KIND_SEQUENCE && t->n_items == 2, "opt_seq.pb");
    tdm_tensor_destroy(t);
    t_values_optional();
    read_fail("values/tensor_bad.pb", NULL, TDM_E_INPUT, "tensor 'x' has 12 bytes of raw_data, its dims 2x2 of float need 16",
              __LINE__);
    read_fail("values/tensor_bad.pb", &kt, TDM_E_INPUT, "12 bytes of raw_data", __LINE__);
    read_fail("values/seq_mixed.pb", &ks, TDM_E_INPUT, "sequence item #1 is of float", __LINE__);
    read_fail("values/seq_nested.pb", &ks, TDM_E_UNSUPPORTED, "sequence of sequences", __LINE__);
    read_fail("values/garbage.pb", NULL, TDM_E_INPUT, "is not an ONNX TensorProto, SequenceProto or OptionalProto",
              __LINE__);
    read_fail("values/garbage.pb", &kt, TDM_E_INPUT, "is not an ONNX TensorProto", __LINE__);
    read_fail("values/nothere.pb", NULL, TDM_E_IO, "does not exist", __LINE__);
    read_fail("bad/empty.onnx", NULL, TDM_E_INPUT, "is empty", __LINE__);
}

/* ------------------------------------------------------------------ memory */

static void t_memory(void)
{
    size_t n;
    unsigned char *b = slurp(path_of("cnn.onnx"), &n);
    CHECK(b != NULL, "read cnn.onnx");
    if (!b)
        return;
    tdm_err e;
    err_clear(&e);
    gr_model *mm = NULL;
    tdm_status st = onnx_load_memory(&e, b, n, "cnn-in-memory", &mm);
    CHECK(st == TDM_OK && mm, "cnn from memory: %s", e.msg);
    gr_model *mf = load_ok(path_of("cnn.onnx"));
    if (mm && mf) {
        CHECK(mm->dir == NULL && strcmp(mm->path, "cnn-in-memory") == 0, "memory model has no folder");
        CHECK(mm->main->n_nodes == 6 && mf->main->n_nodes == 6 && mm->main->n_values == mf->main->n_values,
              "same graph");
        int inits = 0;
        for (int i = 0; i < mf->main->n_values; i++) {
            const gr_value *a = &mf->main->values[i];
            const gr_value *c = value(mm->main, a->name);
            if (!a->init)
                continue;
            inits++;
            CHECK(c && c->init && c->init->nbytes == a->init->nbytes &&
                      memcmp(c->init->data, a->init->data, a->init->nbytes) == 0,
                  "initializer %s differs between file and memory", a->name);
        }
        CHECK(inits == 6, "%d initializers", inits);
        CHECK(mf->main->n_inputs == 1 && mf->main->values[mf->main->inputs[0]].type.dims[3].v == 8, "cnn input");
    }
    gr_model_free(mm);
    gr_model_free(mf);
    /* the bytes are not kept: the model outlives them */
    free(b);
    err_clear(&e);
    st = onnx_load_memory(&e, NULL, 0, "null.onnx", &mm);
    check_err(&e, st, TDM_E_MODEL, "null.onnx", "is empty", "NULL buffer", __LINE__);
}

/* ------------------------------------------------------------------ out of memory */

static void t_nomem(void)
{
    static const char *const files[] = {"features.onnx", "dtypes.onnx", "ext/ok/model.onnx", "values/seq.pb"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        int ok = 0;
        for (long k = 1; k < 20000 && !ok; k++) {
            tdm_err e;
            err_clear(&e);
            gr_model *m = NULL;
            tdm_tensor *t = NULL;
            tdm_kind ks = TDM_KIND_SEQUENCE;
            mem_fail_after(k);
            tdm_status st = strstr(files[f], ".pb") ? onnx_read_value(&e, path_of(files[f]), &ks, &t)
                                                    : onnx_load_file(&e, path_of(files[f]), &m);
            mem_fail_after(0);
            if (st == TDM_OK) {
                ok = 1;
                CHECK(k > 5, "%s: loaded after %ld allocations only", files[f], k);
            } else {
                CHECK(st == TDM_E_NOMEM && m == NULL && t == NULL, "%s, allocation %ld failing: %s (%s)", files[f],
                      k, tdm_status_str(st), e.msg);
            }
            gr_model_free(m);
            tdm_tensor_destroy(t);
        }
        CHECK(ok, "%s never loaded under fault injection", files[f]);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_loader GROUP DATADIR [TMPDIR]\n");
        return 2;
    }
    const char *group = argv[1];
    data_dir = argv[2];
    tmp_dir = argc > 3 ? argv[3] : argv[2];
    if (mkdir(tmp_dir, 0755) && errno != EEXIST) {
        fprintf(stderr, "cannot create %s: %s\n", tmp_dir, strerror(errno));
        return 2;
    }
    if (strcmp(group, "dtypes") == 0)
        t_dtypes();
    else if (strcmp(group, "features") == 0)
        t_features();
    else if (strcmp(group, "maps") == 0)
        t_maps();
    else if (strcmp(group, "external") == 0)
        t_external();
    else if (strcmp(group, "malformed") == 0)
        t_malformed();
    else if (strcmp(group, "deep") == 0)
        t_deep();
    else if (strcmp(group, "values") == 0)
        t_values();
    else if (strcmp(group, "memory") == 0)
        t_memory();
    else if (strcmp(group, "nomem") == 0)
        t_nomem();
    else if (strcmp(group, "truncate") == 0) {
        /* argv[2] is the model here */
        struct stat sb;
        if (stat(argv[2], &sb)) {
            printf("SKIP: %s is absent\n", argv[2]);
            return 77;
        }
        truncate_model(argv[2]);
    } else {
        fprintf(stderr, "unknown group '%s'\n", group);
        return 2;
    }
    printf("%s: %d passed, %d failed\n", group, n_pass, n_fail);
    return n_fail ? 1 : 0;
}
