/* The ONNX backend node tests, run on the cpu session through the public API.
 *
 *   onnx_node_runner [-k SUBSTRING] [-v] [-t SECONDS] [-a ALLOWLIST] [--self-check] [--check-allowlist] [DIR]
 *   (--debug-crash SUBSTRING / --debug-hang SUBSTRING make the matching
 *   cases' children crash or hang, to test the isolation itself)
 *
 * DIR holds one folder per case (model.onnx + test_data_set_N/input_K.pb,
 * output_K.pb); the default is $TANDEM_CACHE/onnx-node/node, else the
 * cache folder CMake was configured with. Each case runs in a forked child
 * under alarm(), so a hang or a crash is that case's failure. Prints one
 * line per op type and a final line `N passed, N failed[, N skipped]`.
 * Exit: 0 all run cases passed; 1 a failure or an allow-list error;
 * 77 no test data (ctest reports the test as skipped). */
#define _POSIX_C_SOURCE 200809L

#include "compare.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef TDM_NODE_DIR
#define TDM_NODE_DIR ".cache/onnx-node/node"
#endif

#define MAX_IO 64

/* ------------------------------------------------------------ small utils */

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "onnx-node: out of memory\n");
        exit(1);
    }
    return p;
}

static char *xstrdup(const char *s)
{
    size_t l = strlen(s);
    char *d = xmalloc(l + 1);
    memcpy(d, s, l + 1);
    return d;
}

static char *join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = xmalloc(la + lb + 2);
    memcpy(s, a, la);
    s[la] = '/';
    memcpy(s + la + 1, b, lb + 1);
    return s;
}

static int exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

static int is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted names in dir (folders only when dirs_only). */
static char **list_dir(const char *dir, const char *prefix, int dirs_only, size_t *n)
{
    DIR *d = opendir(dir);
    char **v = NULL;
    size_t cap = 0;
    *n = 0;
    if (!d)
        return NULL;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' || strncmp(de->d_name, prefix, strlen(prefix)) != 0)
            continue;
        if (dirs_only) {
            char *p = join(dir, de->d_name);
            int ok = is_dir(p);
            free(p);
            if (!ok)
                continue;
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nv = realloc(v, cap * sizeof *v);
            if (!nv) {
                fprintf(stderr, "onnx-node: out of memory\n");
                exit(1);
            }
            v = nv;
        }
        v[(*n)++] = xstrdup(de->d_name);
    }
    closedir(d);
    if (*n)
        qsort(v, *n, sizeof *v, cmp_str);
    return v;
}

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* --------------------------------------------- op types from model.onnx */

/* A minimal protobuf walk (ModelProto.graph = 7, GraphProto.node = 1,
 * NodeProto.op_type = 4, .domain = 7), independent of the library, so that
 * a case is grouped by its op even when tandem cannot load the model. */
typedef struct pb {
    const unsigned char *p, *end;
} pb;

static int pb_varint(pb *b, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (b->p >= b->end)
            return -1;
        unsigned c = *b->p++;
        *v |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80))
            return 0;
    }
    return -1;
}

/* Next field: its number and, for length-delimited ones, the bytes. */
static int pb_field(pb *b, unsigned *field, pb *sub)
{
    uint64_t key, v;
    if (b->p >= b->end || pb_varint(b, &key))
        return -1;
    *field = (unsigned)(key >> 3);
    sub->p = sub->end = NULL;
    switch (key & 7) {
    case 0: return pb_varint(b, &v);
    case 1: if (b->end - b->p < 8) return -1; b->p += 8; return 0;
    case 5: if (b->end - b->p < 4) return -1; b->p += 4; return 0;
    case 2:
        if (pb_varint(b, &v) || v > (uint64_t)(b->end - b->p))
            return -1;
        sub->p = b->p;
        sub->end = b->p + v;
        b->p += v;
        return 0;
    default: return -1;
    }
}

/* The op type of the main graph's nodes: the single distinct one, or the
 * first node's, with its domain when not ai.onnx. NULL when unreadable. */
static char *model_op_group(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            unsigned char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    fclose(f);
    char *result = NULL;
    pb m = {buf, buf + len}, g, sub;
    unsigned fld;
    while (!result && pb_field(&m, &fld, &g) == 0) {
        if (fld != 7 || !g.p)
            continue;
        while (!result && pb_field(&g, &fld, &sub) == 0) {
            if (fld != 1 || !sub.p)
                continue;
            pb node = sub, s;
            const unsigned char *op = NULL, *dom = NULL;
            size_t opl = 0, doml = 0;
            while (pb_field(&node, &fld, &s) == 0) {
                if (fld == 4 && s.p) {
                    op = s.p;
                    opl = (size_t)(s.end - s.p);
                } else if (fld == 7 && s.p) {
                    dom = s.p;
                    doml = (size_t)(s.end - s.p);
                }
            }
            if (op) {
                int onnx_dom = doml == 0 || (doml == 7 && memcmp(dom, "ai.onnx", 7) == 0);
                result = xmalloc(opl + doml + 2);
                if (onnx_dom)
                    snprintf(result, opl + 1, "%.*s", (int)opl, (const char *)op);
                else
                    snprintf(result, opl + doml + 2, "%.*s.%.*s", (int)doml, (const char *)dom, (int)opl,
                             (const char *)op);
            }
        }
    }
    free(buf);
    return result;
}

/* ----------------------------------------------------------- one case */

typedef struct options {
    int verbose;
    int self_check;
    unsigned timeout;
    /* Tests of the isolation itself: the case's child crashes or hangs. */
    const char *debug_crash, *debug_hang;
} options;

/* ONNX's generator stores bfloat16 data as uint16 bit patterns (numpy has
 * no bfloat16): give such a value the type the model declares. */
static tdm_status as_bf16(const tdm_value_info *vi, tdm_tensor **t)
{
    if (vi->dtype != TDM_BFLOAT16 || tdm_tensor_kind(*t) != TDM_KIND_TENSOR || tdm_tensor_dtype(*t) != TDM_UINT16)
        return TDM_OK;
    tdm_tensor *n;
    tdm_status st = tdm_tensor_create(TDM_BFLOAT16, tdm_tensor_rank(*t), tdm_tensor_dims(*t), &n);
    if (st)
        return st;
    memcpy(tdm_tensor_data(n), tdm_tensor_cdata(*t), tdm_tensor_nbytes(n));
    tdm_tensor_destroy(*t);
    *t = n;
    return TDM_OK;
}

/* Reads a .pb value. tdm_value_info cannot say that a type is optional,
 * so when the declared kind does not decode, the file is tried as an
 * OptionalProto and then as a SequenceProto; the first error is kept. */
static tdm_status load_pb(tdm_ctx *ctx, const char *path, const tdm_kind *declared, tdm_tensor **out, char *err,
                          size_t esize)
{
    tdm_status st = tdm_value_load(ctx, path, declared, out);
    if (st == TDM_OK)
        return st;
    snprintf(err, esize, "%s: %s", tdm_status_str(st), tdm_ctx_error(ctx));
    static const tdm_kind others[] = {TDM_KIND_NONE, TDM_KIND_SEQUENCE};
    for (size_t i = 0; i < 2; i++) {
        if (declared && *declared == others[i])
            continue;
        if (tdm_value_load(ctx, path, &others[i], out) == TDM_OK)
            return TDM_OK;
    }
    return st;
}

/* Runs one case; writes "P<detail>" or "F<reason>" into out. */
static void run_case(const char *case_dir, const options *o, char *out, size_t osize)
{
    tdm_ctx *ctx = NULL;
    tdm_model *m = NULL;
    tdm_session *s = NULL;
    char *mp = join(case_dir, "model.onnx");
    tdm_status st;
    size_t nsets = 0;
    char **sets = list_dir(case_dir, "test_data_set_", 1, &nsets);
    double worst = 0;
    char worst_where[200] = "";
    tdm_tensor *ins[MAX_IO] = {0}, *outs[MAX_IO] = {0}, *want[MAX_IO] = {0};
    size_t n_in = 0, n_out = 0;

    if (tdm_ctx_create(&ctx) != TDM_OK) {
        snprintf(out, osize, "Fcannot create a context");
        goto done;
    }
    if (nsets == 0) {
        snprintf(out, osize, "Fno test_data_set_* folder");
        goto done;
    }
    if ((st = tdm_model_load(ctx, mp, &m)) != TDM_OK) {
        if (!o->self_check) {
            snprintf(out, osize, "Fload: %s: %s", tdm_status_str(st), tdm_ctx_error(ctx));
            goto done;
        }
    }
    n_in = m ? tdm_model_input_count(m) : 0;
    n_out = m ? tdm_model_output_count(m) : 0;
    if (n_in > MAX_IO || n_out > MAX_IO) {
        snprintf(out, osize, "Fmore than %d inputs or outputs", MAX_IO);
        goto done;
    }
    if (!o->self_check && (st = tdm_session_create(ctx, m, NULL, &s)) != TDM_OK) {
        snprintf(out, osize, "Fsession: %s: %s", tdm_status_str(st), tdm_ctx_error(ctx));
        goto done;
    }
    for (size_t k = 0; k < nsets; k++) {
        char *sd = join(case_dir, sets[k]);
        char name[64], *p;
        size_t fin = 0, fout = 0;
        for (;; fin++) {
            snprintf(name, sizeof name, "input_%zu.pb", fin);
            p = join(sd, name);
            int e = exists(p);
            free(p);
            if (!e)
                break;
        }
        for (;; fout++) {
            snprintf(name, sizeof name, "output_%zu.pb", fout);
            p = join(sd, name);
            int e = exists(p);
            free(p);
            if (!e)
                break;
        }
        if (o->self_check)
            n_out = fout < MAX_IO ? fout : MAX_IO;
        if (!o->self_check && fin > n_in) {
            snprintf(out, osize, "F%s has %zu input files, the model has %zu inputs", sets[k], fin, n_in);
            free(sd);
            goto done;
        }
        if (fout != n_out) {
            snprintf(out, osize, "F%s has %zu output files, the model has %zu outputs", sets[k], fout, n_out);
            free(sd);
            goto done;
        }
        for (size_t i = 0; !o->self_check && i < fin; i++) {
            tdm_value_info vi;
            tdm_model_input(m, i, &vi);
            snprintf(name, sizeof name, "input_%zu.pb", i);
            p = join(sd, name);
            char lerr[1200] = "";
            st = load_pb(ctx, p, &vi.kind, &ins[i], lerr, sizeof lerr);
            free(p);
            if (st == TDM_OK)
                st = as_bf16(&vi, &ins[i]);
            if (st == TDM_OK && tdm_tensor_kind(ins[i]) == TDM_KIND_NONE) {
                /* An absent optional input is passed as NULL (tdm_session_run). */
                tdm_tensor_destroy(ins[i]);
                ins[i] = NULL;
            }
            if (st) {
                snprintf(out, osize, "F%s/%s (input '%s'): %s", sets[k], name, vi.name,
                         lerr[0] ? lerr : tdm_status_str(st));
                free(sd);
                goto done;
            }
        }
        for (size_t i = 0; i < n_out; i++) {
            tdm_value_info vi;
            const tdm_kind *kind = NULL;
            if (m && tdm_model_output(m, i, &vi) == TDM_OK)
                kind = &vi.kind;
            snprintf(name, sizeof name, "output_%zu.pb", i);
            p = join(sd, name);
            char lerr[1200] = "";
            st = load_pb(ctx, p, kind, &want[i], lerr, sizeof lerr);
            free(p);
            if (st == TDM_OK && kind)
                st = as_bf16(&vi, &want[i]);
            if (st) {
                snprintf(out, osize, "F%s/%s: cannot read the expected value: %s", sets[k], name,
                         lerr[0] ? lerr : tdm_status_str(st));
                free(sd);
                goto done;
            }
        }
        free(sd);
        if (o->self_check) {
            /* The expected values against copies of themselves must match;
             * a perturbed float copy must not. */
            for (size_t i = 0; i < n_out; i++) {
                char msg[512];
                if (tdm_tensor_clone(want[i], &outs[i]) != TDM_OK) {
                    snprintf(out, osize, "Fcannot clone output %zu", i);
                    goto done;
                }
                if (!cmp_values(outs[i], want[i], CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL)) {
                    snprintf(out, osize, "F%s output %zu differs from its own copy: %s", sets[k], i, msg);
                    goto done;
                }
                tdm_tensor *t = outs[i];
                if (tdm_tensor_kind(t) == TDM_KIND_TENSOR && tdm_tensor_dtype(t) == TDM_FLOAT &&
                    tdm_tensor_count(t) > 0) {
                    float *f = tdm_tensor_data(t);
                    f[0] = f[0] != f[0] ? 0.0f : f[0] * 1.01f + 1.0f;
                    if (cmp_values(t, want[i], CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL)) {
                        snprintf(out, osize, "F%s output %zu: a perturbed copy compares equal", sets[k], i);
                        goto done;
                    }
                }
            }
        } else {
            if ((st = tdm_session_run(s, (const tdm_tensor *const *)ins, outs)) != TDM_OK) {
                snprintf(out, osize, "F%s run: %s: %s", sets[k], tdm_status_str(st), tdm_session_error(s));
                goto done;
            }
            for (size_t i = 0; i < n_out; i++) {
                char msg[512];
                cmp_report rep;
                tdm_value_info vi;
                tdm_model_output(m, i, &vi);
                int ok = cmp_values(outs[i], want[i], CMP_RTOL, CMP_ATOL, msg, sizeof msg, &rep);
                if (rep.max_abs > worst || (!worst_where[0] && rep.where[0])) {
                    worst = rep.max_abs;
                    snprintf(worst_where, sizeof worst_where, "output '%.60s' %.120s", vi.name, rep.where);
                }
                if (!ok) {
                    snprintf(out, osize, "F%s output %zu '%s': %s", sets[k], i, vi.name, msg);
                    goto done;
                }
            }
        }
        for (size_t i = 0; i < MAX_IO; i++) {
            tdm_tensor_destroy(ins[i]);
            tdm_tensor_destroy(outs[i]);
            tdm_tensor_destroy(want[i]);
            ins[i] = outs[i] = want[i] = NULL;
        }
    }
    if (worst_where[0])
        snprintf(out, osize, "Pmax |diff| %.3g at %s", worst, worst_where);
    else
        snprintf(out, osize, "P");
done:
    for (size_t i = 0; i < MAX_IO; i++) {
        tdm_tensor_destroy(ins[i]);
        tdm_tensor_destroy(outs[i]);
        tdm_tensor_destroy(want[i]);
    }
    free_list(sets, nsets);
    free(mp);
    tdm_session_destroy(s);
    tdm_model_destroy(m);
    tdm_ctx_destroy(ctx);
}

/* Forks, runs the case in the child under alarm(), collects its verdict.
 * Returns 1 for a pass; *crashed is set for a signal other than the alarm. */
static int run_isolated(const char *case_dir, const options *o, char *msg, size_t msize, int *crashed)
{
    int fd[2];
    *crashed = 0;
    fflush(stdout);
    fflush(stderr);
    if (pipe(fd) != 0) {
        snprintf(msg, msize, "pipe: %s", strerror(errno));
        return 0;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        snprintf(msg, msize, "fork: %s", strerror(errno));
        return 0;
    }
    if (pid == 0) {
        close(fd[0]);
        alarm(o->timeout);
        if (o->debug_crash && strstr(case_dir, o->debug_crash))
            raise(SIGSEGV);
        if (o->debug_hang && strstr(case_dir, o->debug_hang))
            for (;;)
                pause();
        char out[2048];
        run_case(case_dir, o, out, sizeof out);
        size_t len = strlen(out), off = 0;
        while (off < len) {
            ssize_t w = write(fd[1], out + off, len - off);
            if (w <= 0)
                break;
            off += (size_t)w;
        }
        close(fd[1]);
        _exit(0);
    }
    close(fd[1]);
    char buf[2048];
    size_t len = 0;
    for (;;) {
        ssize_t r = read(fd[0], buf + len, sizeof buf - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
        if (len == sizeof buf - 1)
            break;
    }
    buf[len] = '\0';
    close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        if (sig == SIGALRM) {
            snprintf(msg, msize, "timed out after %u s", o->timeout);
        } else {
            *crashed = 1;
            snprintf(msg, msize, "CRASHED with signal %d (%s)", sig, strsignal(sig));
        }
        return 0;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || len == 0) {
        *crashed = 1;
        snprintf(msg, msize, "CRASHED: the case's process exited with status %d without a verdict",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return 0;
    }
    snprintf(msg, msize, "%s", buf + 1);
    return buf[0] == 'P';
}

/* ----------------------------------------------------------- allow-list */

typedef struct allow {
    char *name, *reason;
    int used;
} allow;

static int load_allowlist(const char *path, allow **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "onnx-node: cannot open the allow-list '%s': %s\n", path, strerror(errno));
        return -1;
    }
    char line[1024];
    size_t cap = 0, lineno = 0;
    int bad = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        size_t l = strlen(p);
        while (l && (p[l - 1] == '\n' || p[l - 1] == '\r' || p[l - 1] == ' ' || p[l - 1] == '\t'))
            p[--l] = '\0';
        if (!l)
            continue;
        char *sp = p + strcspn(p, " \t");
        char *reason = sp;
        if (*sp) {
            *sp = '\0';
            reason = sp + 1;
            while (*reason == ' ' || *reason == '\t')
                reason++;
        }
        if (!*reason) {
            fprintf(stderr, "onnx-node: %s:%zu: '%s' has no reason\n", path, lineno, p);
            bad = 1;
            continue;
        }
        for (size_t i = 0; i < *n; i++)
            if (strcmp((*out)[i].name, p) == 0) {
                fprintf(stderr, "onnx-node: %s:%zu: '%s' is listed twice\n", path, lineno, p);
                bad = 1;
            }
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            allow *na = realloc(*out, cap * sizeof *na);
            if (!na) {
                fclose(f);
                return -1;
            }
            *out = na;
        }
        (*out)[*n].name = xstrdup(p);
        (*out)[*n].reason = xstrdup(reason);
        (*out)[*n].used = 0;
        (*n)++;
    }
    fclose(f);
    return bad ? -1 : 0;
}

/* ------------------------------------------------------------------ main */

typedef struct group {
    char *op;
    size_t passed, failed, skipped;
    char *failures; /* space-separated case names */
    size_t flen, fcap;
} group;

static group *find_group(group **gs, size_t *ng, size_t *cap, const char *op)
{
    for (size_t i = 0; i < *ng; i++)
        if (strcmp((*gs)[i].op, op) == 0)
            return &(*gs)[i];
    if (*ng == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        group *n = realloc(*gs, *cap * sizeof *n);
        if (!n) {
            fprintf(stderr, "onnx-node: out of memory\n");
            exit(1);
        }
        *gs = n;
    }
    group *g = &(*gs)[(*ng)++];
    memset(g, 0, sizeof *g);
    g->op = xstrdup(op);
    return g;
}

static void add_failure(group *g, const char *name)
{
    size_t l = strlen(name);
    if (g->flen + l + 2 > g->fcap) {
        g->fcap = (g->flen + l + 2) * 2;
        char *n = realloc(g->failures, g->fcap);
        if (!n)
            exit(1);
        g->failures = n;
    }
    if (g->flen)
        g->failures[g->flen++] = ' ';
    memcpy(g->failures + g->flen, name, l + 1);
    g->flen += l;
}

static int cmp_group(const void *a, const void *b) { return strcmp(((const group *)a)->op, ((const group *)b)->op); }

static void usage(void)
{
    fprintf(stderr, "usage: onnx_node_runner [-k SUBSTRING] [-v] [-t SECONDS] [-a ALLOWLIST] [--self-check]\n"
                    "                        [--check-allowlist] [DIR]\n");
}

int main(int argc, char **argv)
{
    options o = {0, 0, 20, NULL, NULL};
    const char *filter = NULL, *allow_path = NULL, *dir = NULL;
    int check_only = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-v") == 0)
            o.verbose = 1;
        else if (strcmp(a, "--self-check") == 0)
            o.self_check = 1;
        else if (strcmp(a, "--check-allowlist") == 0)
            check_only = 1;
        else if (strcmp(a, "-k") == 0 && i + 1 < argc)
            filter = argv[++i];
        else if (strcmp(a, "--debug-crash") == 0 && i + 1 < argc)
            o.debug_crash = argv[++i];
        else if (strcmp(a, "--debug-hang") == 0 && i + 1 < argc)
            o.debug_hang = argv[++i];
        else if (strcmp(a, "-a") == 0 && i + 1 < argc)
            allow_path = argv[++i];
        else if (strcmp(a, "-t") == 0 && i + 1 < argc) {
            char *end;
            long t = strtol(argv[++i], &end, 10);
            if (*end || t <= 0 || t > 3600) {
                usage();
                return 1;
            }
            o.timeout = (unsigned)t;
        } else if (a[0] == '-') {
            usage();
            return 1;
        } else if (!dir)
            dir = a;
        else {
            usage();
            return 1;
        }
    }
    char *envdir = NULL;
    if (!dir) {
        const char *cache = getenv("TANDEM_CACHE");
        if (cache && *cache) {
            envdir = join(cache, "onnx-node/node");
            dir = envdir;
        } else {
            dir = TDM_NODE_DIR;
        }
    }
    if (!is_dir(dir)) {
        fprintf(stderr, "onnx-node: no test data at '%s'; run scripts/gen-node-tests.sh\n", dir);
        free(envdir);
        return 77;
    }
    size_t ncases = 0, nallow = 0;
    char **cases = list_dir(dir, "test_", 1, &ncases);
    allow *al = NULL;
    int errors = 0;
    if (allow_path && load_allowlist(allow_path, &al, &nallow) != 0)
        errors++;
    for (size_t i = 0; i < nallow; i++) {
        char *p = join(dir, al[i].name);
        if (!is_dir(p)) {
            fprintf(stderr, "onnx-node: the allow-list names '%s', which is not a case in %s\n", al[i].name, dir);
            errors++;
        }
        free(p);
    }
    if (check_only) {
        printf("allow-list: %zu entries, %zu cases, %d error%s\n", nallow, ncases, errors, errors == 1 ? "" : "s");
        for (size_t i = 0; i < nallow; i++) {
            free(al[i].name);
            free(al[i].reason);
        }
        free(al);
        free(envdir);
        free_list(cases, ncases);
        return errors ? 1 : 0;
    }

    group *gs = NULL;
    size_t ng = 0, gcap = 0, passed = 0, failed = 0, skipped = 0, crashed = 0;
    char *crash_lines = NULL;
    size_t cl_len = 0;
    for (size_t c = 0; c < ncases; c++) {
        const char *name = cases[c];
        if (filter && !strstr(name, filter))
            continue;
        char *cd = join(dir, name);
        char *mp = join(cd, "model.onnx");
        /* The group: an _expanded case joins its plain sibling's op. */
        char *op = NULL;
        size_t nl = strlen(name);
        if (nl > 9 && strcmp(name + nl - 9, "_expanded") == 0) {
            char *sib = xstrdup(cd);
            sib[strlen(sib) - 9] = '\0';
            char *smp = join(sib, "model.onnx");
            op = model_op_group(smp);
            free(smp);
            free(sib);
        }
        if (!op)
            op = model_op_group(mp);
        if (!op)
            op = xstrdup("(unreadable model)");
        group *g = find_group(&gs, &ng, &gcap, op);
        const allow *listed = NULL;
        for (size_t i = 0; i < nallow; i++)
            if (strcmp(al[i].name, name) == 0) {
                listed = &al[i];
                al[i].used = 1;
            }
        if (listed) {
            g->skipped++;
            skipped++;
            if (o.verbose)
                printf("SKIP %s: %s\n", name, listed->reason);
        } else if (!exists(mp)) {
            fprintf(stderr, "onnx-node: case '%s' has no model.onnx and is not in the allow-list\n", name);
            errors++;
        } else {
            char msg[2048];
            int was_crash;
            int ok = run_isolated(cd, &o, msg, sizeof msg, &was_crash);
            if (ok) {
                g->passed++;
                passed++;
                if (o.verbose)
                    printf("PASS %s%s%s\n", name, msg[0] ? ": " : "", msg);
            } else {
                g->failed++;
                failed++;
                add_failure(g, name);
                if (o.verbose)
                    printf("FAIL %s: %s\n", name, msg);
                if (was_crash) {
                    crashed++;
                    size_t need = cl_len + strlen(name) + strlen(msg) + 16;
                    char *n = realloc(crash_lines, need);
                    if (n) {
                        crash_lines = n;
                        cl_len += (size_t)sprintf(crash_lines + cl_len, "  %s: %s\n", name, msg);
                    }
                }
            }
        }
        free(op);
        free(mp);
        free(cd);
    }
    /* A run that ran nothing (an empty folder, a -k that matches no case)
     * proves nothing: it is an error, not a pass. */
    if (passed + failed == 0) {
        fprintf(stderr, "onnx-node: no case was run from %s%s%s\n", dir, filter ? " matching " : "",
                filter ? filter : "");
        errors++;
    }
    qsort(gs, ng, sizeof *gs, cmp_group);
    for (size_t i = 0; i < ng; i++) {
        group *g = &gs[i];
        if (g->passed || g->failed || g->skipped) {
            printf("%s: %zu passed, %zu failed", g->op, g->passed, g->failed);
            if (g->skipped)
                printf(", %zu skipped", g->skipped);
            if (g->failed)
                printf(" (%s)", g->failures);
            printf("\n");
        }
        free(g->op);
        free(g->failures);
    }
    free(gs);
    if (crashed) {
        printf("\n*** %zu case%s CRASHED the library (a bug: the library must never crash):\n%s\n", crashed,
               crashed == 1 ? "" : "s", crash_lines);
    }
    free(crash_lines);
    if (allow_path)
        printf("%zu passed, %zu failed, %zu skipped\n", passed, failed, skipped);
    else
        printf("%zu passed, %zu failed\n", passed, failed);
    for (size_t i = 0; i < nallow; i++) {
        free(al[i].name);
        free(al[i].reason);
    }
    free(al);
    free_list(cases, ncases);
    free(envdir);
    if (errors)
        fprintf(stderr, "onnx-node: %d error%s in the case list or allow-list\n", errors, errors == 1 ? "" : "s");
    return failed || errors ? 1 : 0;
}
