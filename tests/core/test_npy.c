/* Unit test of the .npy codec (src/core/npy.c): round trips of every
 * element type, numpy header variants, refusals with sentences, malformed
 * input (every truncation and fixed-seed random corruption must fail
 * cleanly), and the no-overwrite / no-leftover rules of writing. */
#define _POSIX_C_SOURCE 200809L

#include "core/npy.h"
#include "core/tensor.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int checks, failures;

#define CHECK(cond, ...)                                                                                             \
    do {                                                                                                             \
        checks++;                                                                                                    \
        if (!(cond)) {                                                                                               \
            failures++;                                                                                              \
            printf("FAIL line %d: ", __LINE__);                                                                      \
            printf(__VA_ARGS__);                                                                                     \
            printf("\n");                                                                                            \
        }                                                                                                            \
    } while (0)

/* A .npy 1.0 file from a header dict and data. */
static unsigned char *make_file(const char *dict, const void *data, size_t dlen, int major, size_t *size)
{
    size_t dl = strlen(dict), pre = major == 1 ? 10 : 12;
    size_t hl = dl + 1;
    hl += (64 - (pre + hl) % 64) % 64;
    *size = pre + hl + dlen;
    unsigned char *b = malloc(*size);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    if (major == 1) {
        b[8] = (unsigned char)(hl & 0xFF);
        b[9] = (unsigned char)(hl >> 8);
    } else {
        b[8] = (unsigned char)(hl & 0xFF);
        b[9] = (unsigned char)(hl >> 8);
        b[10] = b[11] = 0;
    }
    memcpy(b + pre, dict, dl);
    memset(b + pre + dl, ' ', hl - dl - 1);
    b[pre + hl - 1] = '\n';
    if (dlen)
        memcpy(b + pre + hl, data, dlen);
    return b;
}

static tdm_status decode(const char *dict, const void *data, size_t dlen, int major, tdm_tensor **t, tdm_err *e)
{
    size_t size;
    unsigned char *b = make_file(dict, data, dlen, major, &size);
    tdm_status st = npy_decode(e, "t.npy", b, size, t);
    free(b);
    return st;
}

static void roundtrip_dtype(tdm_dtype dt, tdm_dtype back)
{
    tdm_err e;
    int64_t dims[3] = {2, 3, 2};
    tdm_tensor *t, *r = NULL;
    CHECK(tensor_new(&e, dt, 3, dims, &t) == TDM_OK, "create %s", tdm_dtype_name(dt));
    unsigned char *p = t->data;
    for (size_t i = 0; i < t->nbytes; i++)
        p[i] = (unsigned char)(i * 37 + 11);
    if (dt == TDM_BOOL)
        for (size_t i = 0; i < t->count; i++)
            p[i] = (unsigned char)(i & 1);
    unsigned char *buf;
    size_t size;
    CHECK(npy_encode(&e, t, &buf, &size) == TDM_OK, "encode %s: %s", tdm_dtype_name(dt), e.msg);
    CHECK(size % 64 == t->nbytes % 64, "%s: data does not start on a 64-byte boundary", tdm_dtype_name(dt));
    CHECK(npy_decode(&e, "x.npy", buf, size, &r) == TDM_OK, "decode %s: %s", tdm_dtype_name(dt), e.msg);
    if (r) {
        CHECK(r->dtype == back, "%s came back as %s", tdm_dtype_name(dt), tdm_dtype_name(r->dtype));
        CHECK(shape_equal(r->rank, r->dims, 3, dims), "%s: shape", tdm_dtype_name(dt));
        CHECK(r->nbytes == t->nbytes && memcmp(r->data, t->data, t->nbytes) == 0, "%s: data differs",
              tdm_dtype_name(dt));
    }
    free(buf);
    tdm_tensor_destroy(t);
    tdm_tensor_destroy(r);
}

static void test_roundtrips(void)
{
    static const tdm_dtype same[] = {TDM_FLOAT, TDM_DOUBLE, TDM_FLOAT16, TDM_INT8, TDM_INT16, TDM_INT32,
                                     TDM_INT64, TDM_UINT8, TDM_UINT16, TDM_UINT32, TDM_UINT64, TDM_BOOL,
                                     TDM_COMPLEX64, TDM_COMPLEX128};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        roundtrip_dtype(same[i], same[i]);
    roundtrip_dtype(TDM_BFLOAT16, TDM_UINT16);
    roundtrip_dtype(TDM_FLOAT8E4M3FN, TDM_UINT8);
    roundtrip_dtype(TDM_INT4, TDM_INT8);

    /* Scalars and empty tensors. */
    tdm_err e;
    tdm_tensor *t, *r;
    unsigned char *buf;
    size_t size;
    tensor_new(&e, TDM_FLOAT, 0, NULL, &t);
    *(float *)t->data = 2.5f;
    npy_encode(&e, t, &buf, &size);
    CHECK(strstr((char *)buf + 10, "'shape': ()") != NULL, "scalar header: %.60s", (char *)buf + 10);
    CHECK(npy_decode(&e, "s.npy", buf, size, &r) == TDM_OK && r->rank == 0 && *(float *)r->data == 2.5f,
          "scalar round trip");
    free(buf);
    tdm_tensor_destroy(t);
    tdm_tensor_destroy(r);
    int64_t z[2] = {0, 5};
    tensor_new(&e, TDM_INT32, 2, z, &t);
    npy_encode(&e, t, &buf, &size);
    CHECK(strstr((char *)buf + 10, "'shape': (0, 5)") != NULL, "empty header: %.60s", (char *)buf + 10);
    CHECK(npy_decode(&e, "z.npy", buf, size, &r) == TDM_OK && r->count == 0 && r->dims[1] == 5, "empty round trip");
    free(buf);
    tdm_tensor_destroy(t);
    tdm_tensor_destroy(r);
    int64_t one = 4;
    tensor_new(&e, TDM_FLOAT, 1, &one, &t);
    memset(t->data, 0, t->nbytes);
    npy_encode(&e, t, &buf, &size);
    CHECK(strstr((char *)buf + 10, "'shape': (4,)") != NULL, "rank-1 header: %.60s", (char *)buf + 10);
    free(buf);
    tdm_tensor_destroy(t);

    /* Strings: UTF-8 in, UTF-32 '<U{max code points}' out, and back. */
    int64_t d3 = 3;
    tensor_new(&e, TDM_STRING, 1, &d3, &t);
    const char *s0 = "h\xc3\xa9llo", *s2 = "\xe4\xb8\xad\xf0\x9f\x98\x80";
    tdm_tensor_set_string(t, 0, s0, strlen(s0));
    tdm_tensor_set_string(t, 2, s2, strlen(s2));
    CHECK(npy_encode(&e, t, &buf, &size) == TDM_OK, "encode strings: %s", e.msg);
    CHECK(strstr((char *)buf + 10, "'descr': '<U5'") != NULL, "string descr: %.40s", (char *)buf + 10);
    CHECK(npy_decode(&e, "s.npy", buf, size, &r) == TDM_OK, "decode strings: %s", e.msg);
    if (r) {
        CHECK(r->dtype == TDM_STRING && r->count == 3, "string tensor");
        CHECK(strcmp(tensor_str(r, 0), s0) == 0 && strcmp(tensor_str(r, 1), "") == 0 &&
                  strcmp(tensor_str(r, 2), s2) == 0,
              "string values: '%s' '%s' '%s'", tensor_str(r, 0), tensor_str(r, 1), tensor_str(r, 2));
    }
    free(buf);
    tdm_tensor_destroy(t);
    tdm_tensor_destroy(r);
}

static void test_variants(void)
{
    tdm_err e;
    tdm_tensor *t = NULL;
    float f[2] = {1.5f, -2.0f};
    /* What numpy writes, and reasonable hand-written variants. */
    const char *ok[] = {
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
        "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, )}",
        "{'shape': (2L,), 'fortran_order': False, 'descr': '<f4'}",
        "  {  'descr' :'<f4','fortran_order':False,'shape':(2)}  ",
        "{'descr': '=f4', 'fortran_order': False, 'shape': (1, 2), }",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        for (int major = 1; major <= 3; major++) {
            tdm_status st = decode(ok[i], f, sizeof f, major, &t, &e);
            CHECK(st == TDM_OK && t && t->dtype == TDM_FLOAT && t->count == 2 && ((float *)t->data)[1] == -2.0f,
                  "variant %zu (v%d) refused: %s", i, major, e.msg);
            tdm_tensor_destroy(t);
            t = NULL;
        }
    }
    /* Byte strings and bool normalisation. */
    CHECK(decode("{'descr': '|S3', 'fortran_order': False, 'shape': (2,), }", "ab\0xyz", 6, 1, &t, &e) == TDM_OK &&
              strcmp(tensor_str(t, 0), "ab") == 0 && strcmp(tensor_str(t, 1), "xyz") == 0,
          "|S3: %s", e.msg);
    tdm_tensor_destroy(t);
    CHECK(decode("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", "\x00\x07", 2, 1, &t, &e) == TDM_OK &&
              ((unsigned char *)t->data)[1] == 1,
          "bool normalised: %s", e.msg);
    tdm_tensor_destroy(t);

    /* Refusals: each a sentence naming the file, TDM_E_INPUT. */
    struct {
        const char *dict;
        size_t dlen;
        const char *fragment;
    } bad[] = {
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", 8, "Fortran order"},
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8, "big-endian"},
        {"{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", 16, "Python objects"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8, "structured"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 8, "needs 12"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 8, "needs 4"},
        {"{'descr': '<f4', 'fortran_order': False}", 8, "lacks 'shape'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", 8, "unknown header key"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8, "twice"},
        {"{'descr': '<f3', 'fortran_order': False, 'shape': (2,), }", 8, "'<f3'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 8, "malformed 'shape'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 8, "malformed 'shape'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", 8, "too large"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1), }", 4, "dimensions"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } junk", 8, "junk"},
        {"['descr', '<f4']", 8, "not a dict"},
        {"{'descr': '<U2', 'fortran_order': False, 'shape': (1,), }", 8, "not a Unicode"},
    };
    unsigned char junk[16];
    memset(junk, 0xFF, sizeof junk);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tdm_status st = decode(bad[i].dict, junk, bad[i].dlen, 1, &t, &e);
        CHECK(st == TDM_E_INPUT && t == NULL, "case %zu accepted (status %d)", i, (int)st);
        CHECK(strstr(e.msg, bad[i].fragment) != NULL && strstr(e.msg, "t.npy") != NULL,
              "case %zu: message '%s' lacks '%s' or the file name", i, e.msg, bad[i].fragment);
        tdm_tensor_destroy(t);
        t = NULL;
    }
    /* Bad magic and version. */
    CHECK(npy_decode(&e, "m.npy", "\x93NUMPX\x01\x00\x00\x00", 10, &t) == TDM_E_INPUT && strstr(e.msg, "magic"),
          "bad magic: %s", e.msg);
    CHECK(npy_decode(&e, "m.npy", "\x93NUMPY\x04\x00\x00\x00", 10, &t) == TDM_E_INPUT && strstr(e.msg, "4.0"),
          "bad version: %s", e.msg);
    CHECK(npy_decode(&e, "m.npy", "\x93NUMPY\x01\x00\xff\x00{", 11, &t) == TDM_E_INPUT &&
              strstr(e.msg, "truncated"),
          "header past the end: %s", e.msg);
}

static uint64_t rng_state = 12345;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void test_malformed(void)
{
    tdm_err e;
    int64_t dims[2] = {3, 2};
    tdm_tensor *src, *t;
    tensor_new(&e, TDM_FLOAT, 2, dims, &src);
    memset(src->data, 0x3F, src->nbytes);
    unsigned char *buf;
    size_t size;
    npy_encode(&e, src, &buf, &size);
    /* Every truncation fails cleanly. */
    size_t refused = 0;
    for (size_t n = 0; n < size; n++) {
        t = NULL;
        tdm_status st = npy_decode(&e, "cut.npy", buf, n, &t);
        refused += st == TDM_E_INPUT && t == NULL;
        tdm_tensor_destroy(t);
    }
    CHECK(refused == size, "%zu of %zu truncations refused", refused, size);
    /* Random corruption of the header: never a crash; any accepted result
     * is self-consistent. */
    unsigned char *m = malloc(size + 64);
    size_t accepted = 0, inconsistent = 0, wrong_status = 0;
    for (int it = 0; it < 20000; it++) {
        memcpy(m, buf, size);
        size_t msize = size;
        int flips = 1 + (int)(rnd() % 4);
        for (int k = 0; k < flips; k++) {
            size_t at = 6 + rnd() % 80;
            m[at] = rnd() % 3 == 0 ? (unsigned char)"{}(),:' 0123456789<|fiubUS"[rnd() % 26] : (unsigned char)rnd();
        }
        if (rnd() % 8 == 0)
            msize += rnd() % 64;
        t = NULL;
        tdm_status st = npy_decode(&e, "fuzz.npy", m, msize, &t);
        if (st == TDM_OK) {
            accepted++;
            size_t cnt;
            if (shape_count(t->rank, t->dims, &cnt) || cnt != t->count)
                inconsistent++;
        } else if (st != TDM_E_INPUT && st != TDM_E_NOMEM && st != TDM_E_UNSUPPORTED) {
            wrong_status++;
        }
        tdm_tensor_destroy(t);
    }
    CHECK(inconsistent == 0 && wrong_status == 0, "fuzz: %zu inconsistent, %zu bad statuses (%zu accepted)",
          inconsistent, wrong_status, accepted);
    free(m);
    free(buf);
    tdm_tensor_destroy(src);
}

static size_t count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL)
        n += de->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static void test_files(const char *tmp)
{
    tdm_ctx *ctx;
    tdm_ctx_create(&ctx);
    char dir[512], path[600], noent[700];
    snprintf(dir, sizeof dir, "%s/npy-files-%ld", tmp, (long)getpid());
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/a.npy", dir);
    unlink(path);
    int64_t d2 = 2;
    tdm_tensor *t, *r = NULL;
    tdm_tensor_create(TDM_INT64, 1, &d2, &t);
    ((int64_t *)tdm_tensor_data(t))[0] = -7;
    ((int64_t *)tdm_tensor_data(t))[1] = 1LL << 40;
    CHECK(tdm_tensor_save_npy(ctx, t, path, 0) == TDM_OK, "save: %s", tdm_ctx_error(ctx));
    CHECK(tdm_value_load(ctx, path, NULL, &r) == TDM_OK && ((int64_t *)tdm_tensor_data(r))[1] == 1LL << 40,
          "load back: %s", tdm_ctx_error(ctx));
    tdm_tensor_destroy(r);
    r = NULL;
    /* Never overwrite unless asked. */
    CHECK(tdm_tensor_save_npy(ctx, t, path, 0) == TDM_E_IO && strstr(tdm_ctx_error(ctx), path),
          "second save without overwrite: %s", tdm_ctx_error(ctx));
    ((int64_t *)tdm_tensor_data(t))[0] = 5;
    CHECK(tdm_tensor_save_npy(ctx, t, path, 1) == TDM_OK, "overwrite: %s", tdm_ctx_error(ctx));
    CHECK(tdm_value_load(ctx, path, NULL, &r) == TDM_OK && ((int64_t *)tdm_tensor_data(r))[0] == 5,
          "overwritten value");
    tdm_tensor_destroy(r);
    r = NULL;
    CHECK(count_entries(dir) == 1, "temporary files left: %zu entries", count_entries(dir));
    /* Writing into a missing folder fails with TDM_E_IO naming the file. */
    snprintf(noent, sizeof noent, "%s/missing/b.npy", dir);
    CHECK(tdm_tensor_save_npy(ctx, t, noent, 0) == TDM_E_IO && strstr(tdm_ctx_error(ctx), "b.npy"),
          "save into a missing folder: %s", tdm_ctx_error(ctx));
    /* A sequence cannot be one .npy. */
    tdm_tensor *seq;
    tdm_sequence_create(TDM_FLOAT, &seq);
    snprintf(noent, sizeof noent, "%s/seq.npy", dir);
    CHECK(tdm_tensor_save_npy(ctx, seq, noent, 0) != TDM_OK && count_entries(dir) == 1, "sequence saved");
    tdm_tensor_destroy(seq);
    /* Loading: missing → TDM_E_IO naming the file; sniffing without extension. */
    snprintf(noent, sizeof noent, "%s/nope.npy", dir);
    CHECK(tdm_value_load(ctx, noent, NULL, &r) == TDM_E_IO && strstr(tdm_ctx_error(ctx), "nope.npy"),
          "missing file: %s", tdm_ctx_error(ctx));
    snprintf(noent, sizeof noent, "%s/noext", dir);
    rename(path, noent);
    CHECK(tdm_value_load(ctx, noent, NULL, &r) == TDM_OK && tdm_tensor_dtype(r) == TDM_INT64,
          "sniffed .npy: %s", tdm_ctx_error(ctx));
    tdm_tensor_destroy(r);
    r = NULL;
    tdm_kind want_seq = TDM_KIND_SEQUENCE;
    CHECK(tdm_value_load(ctx, noent, &want_seq, &r) == TDM_E_INPUT && r == NULL, "npy as a sequence");
    unlink(noent);
    rmdir(dir);
    tdm_tensor_destroy(t);
    tdm_ctx_destroy(ctx);
}

int main(int argc, char **argv)
{
    test_roundtrips();
    test_variants();
    test_malformed();
    test_files(argc > 1 ? argv[1] : ".");
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
