/* Shared helpers of the tool: errors, exit codes, number parsing, type and
 * shape strings, half-precision conversions. */
#define _POSIX_C_SOURCE 200809L /* isatty, fileno, clock_gettime */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int cli_exit_code(tdm_status st)
{
    /* No default: the compiler flags a status missing here. */
    switch (st) {
    case TDM_OK: return EXIT_OK;
    case TDM_E_USAGE: return EXIT_USAGE;
    case TDM_E_MODEL:
    case TDM_E_UNSUPPORTED:
    case TDM_E_INPUT:
    case TDM_E_NOMEM:
    case TDM_E_RUNTIME: return EXIT_INVALID;
    case TDM_E_POLICY: return EXIT_POLICY;
    case TDM_E_DEVICE: return EXIT_DEVICE;
    case TDM_E_IO: return EXIT_IO;
    case TDM_E_INTERNAL: return EXIT_INTERNAL;
    }
    return EXIT_INTERNAL;
}

#define LINE_MAX_CHARS 200

void cli_print_wrapped(const char *lead, const char *cont, const char *msg)
{
    size_t len = strlen(msg);
    size_t first = 1;
    const char *p = msg;
    fputs(lead, stderr);
    while (len > 0) {
        size_t take = len;
        if (len > LINE_MAX_CHARS) {
            /* Cut at the last space within the limit; never inside a token
             * (a number, a name, a path): one longer than the line stays
             * whole, up to the space after it. */
            take = LINE_MAX_CHARS;
            while (take > 0 && p[take] != ' ')
                take--;
            if (take == 0)
                for (take = LINE_MAX_CHARS; take < len && p[take] != ' ';)
                    take++;
        }
        if (!first)
            fputs(cont, stderr);
        fwrite(p, 1, take, stderr);
        fputc('\n', stderr);
        p += take;
        len -= take;
        while (len > 0 && *p == ' ') {
            p++;
            len--;
        }
        first = 0;
    }
    if (first)
        fputc('\n', stderr);
}

void cli_error(const char *fmt, ...)
{
    /* Formatted whole (a value may be thousands of characters long), then
     * every long value shortened in the middle by the library's one rule,
     * so that the sentence keeps its reason within the line. */
    char stack[2048], out[2048];
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int need = vsnprintf(stack, sizeof stack, fmt, ap);
    char *full = stack;
    if (need >= 0 && (size_t)need >= sizeof stack && (full = malloc((size_t)need + 1)) != NULL)
        vsnprintf(full, (size_t)need + 1, fmt, ap2);
    va_end(ap2);
    va_end(ap);
    tdm_sentence_shorten(out, sizeof out, full ? full : stack);
    if (full && full != stack)
        free(full);
    cli_print_wrapped("tandem: ", "  ", out);
}

int cli_fail(tdm_status st, const char *what, const char *msg)
{
    if (!msg || !*msg)
        msg = tdm_status_str(st);
    if (what)
        cli_error("%s: %s", what, msg);
    else
        cli_error("%s", msg);
    return cli_exit_code(st);
}

int cli_parse_i64(const char *s, long long *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < 0)
        return -1;
    *out = v;
    return 0;
}

const char *cli_type_str(tdm_kind kind, tdm_dtype dtype, char *buf, size_t size)
{
    const char *dn = dtype == TDM_UNDEFINED ? "?" : tdm_dtype_name(dtype);
    if (kind == TDM_KIND_SEQUENCE)
        snprintf(buf, size, "sequence<%s>", dn);
    else if (kind == TDM_KIND_NONE)
        snprintf(buf, size, "optional<%s>", dn);
    else
        snprintf(buf, size, "%s", dn);
    return buf;
}

const char *cli_info_shape_str(const tdm_value_info *vi, char *buf, size_t size)
{
    size_t off = 0;
    if (size == 0)
        return buf;
    buf[0] = '\0';
    if (vi->rank < 0) {
        snprintf(buf, size, "[?…]");
        return buf;
    }
    off += (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < vi->rank && off < size; d++) {
        const tdm_dim *dim = &vi->dims[d];
        const char *sep = d ? ", " : "";
        int n;
        if (dim->value >= 0)
            n = snprintf(buf + off, size - off, "%s%lld", sep, (long long)dim->value);
        else
            n = snprintf(buf + off, size - off, "%s%s", sep, dim->symbol && *dim->symbol ? dim->symbol : "?");
        if (n < 0)
            break;
        off += (size_t)n;
    }
    if (off < size)
        snprintf(buf + off, size - off, "]");
    return buf;
}

const char *cli_shape_str(int rank, const int64_t *dims, char *buf, size_t size)
{
    size_t off = 0;
    if (size == 0)
        return buf;
    buf[0] = '\0';
    if (rank == 0) {
        snprintf(buf, size, "scalar");
        return buf;
    }
    for (int d = 0; d < rank && off < size; d++) {
        int n = snprintf(buf + off, size - off, d ? "x%lld" : "%lld", (long long)dims[d]);
        if (n < 0)
            break;
        off += (size_t)n;
    }
    return buf;
}

/* ---- half precision ---- */

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float cli_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF;
    if (exp == 0x1F)
        return u2f(sign | 0x7F800000u | (man << 13));
    if (exp == 0) {
        if (man == 0)
            return u2f(sign);
        float v = (float)man / 16777216.0f; /* man * 2^-24 */
        return sign ? -v : v;
    }
    return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t cli_f32_to_f16(float f)
{
    uint32_t u = f2u(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t exp = (u >> 23) & 0xFF, man = u & 0x7FFFFF;
    if (exp == 0xFF)
        return (uint16_t)(sign | 0x7C00 | (man ? 0x200 : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 0x1F)
        return (uint16_t)(sign | 0x7C00);
    if (e <= 0) {
        if (e < -10)
            return sign;
        man |= 0x800000;
        int shift = 14 - e;
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1FFF;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
        half++; /* may carry into the exponent: still correct */
    return (uint16_t)(sign | half);
}

float cli_bf16_to_f32(uint16_t b) { return u2f((uint32_t)b << 16); }

uint16_t cli_f32_to_bf16(float f)
{
    uint32_t u = f2u(f);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFF))
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7FFF + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

int cli_bf16_from_bits(const tdm_value_info *vi, tdm_tensor **t)
{
    if (vi->dtype != TDM_BFLOAT16 || tdm_tensor_kind(*t) != TDM_KIND_TENSOR || tdm_tensor_dtype(*t) != TDM_UINT16)
        return 0;
    tdm_tensor *b;
    if (tdm_tensor_create(TDM_BFLOAT16, tdm_tensor_rank(*t), tdm_tensor_dims(*t), &b) != TDM_OK) {
        cli_error("out of memory");
        return EXIT_INTERNAL;
    }
    if (tdm_tensor_nbytes(b))
        memcpy(tdm_tensor_data(b), tdm_tensor_cdata(*t), tdm_tensor_nbytes(b));
    tdm_tensor_destroy(*t);
    *t = b;
    return 0;
}

/* ---- shapes and fixed-seed random inputs (run, bench) ---- */

int cli_parse_dims(const char *cmd, const char *name, const char *value, int *rank, int64_t *dims)
{
    const char *p = value;
    *rank = 0;
    if (!*p || strcmp(p, "scalar") == 0)
        return 0;
    for (;;) {
        const char *x = strchr(p, 'x');
        size_t l = x ? (size_t)(x - p) : strlen(p);
        char part[32];
        long long v;
        if (*rank >= CLI_MAX_RANK || l == 0 || l >= sizeof part)
            goto bad;
        memcpy(part, p, l);
        part[l] = '\0';
        if (strcmp(part, "?") == 0)
            v = -1;
        else if (cli_parse_i64(part, &v))
            goto bad;
        dims[(*rank)++] = v;
        if (!x)
            return 0;
        p = x + 1;
    }
bad:
    cli_error("%s: --shape %s=%s: expected dimensions like 1x3x224x224 ('?' keeps a dimension)", cmd, name, value);
    return -1;
}

uint64_t cli_rng_next(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s)
{
    return (double)(cli_rng_next(s) >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0;
}

static int fill_random(tdm_tensor *t, uint64_t *rng, const char *name, const char *filler)
{
    size_t n = tdm_tensor_count(t);
    void *p = tdm_tensor_data(t);
    tdm_dtype dt = tdm_tensor_dtype(t);
    for (size_t i = 0; i < n; i++) {
        uint64_t r10 = cli_rng_next(rng) % 10;
        switch (dt) {
        case TDM_FLOAT: ((float *)p)[i] = (float)rng_unit(rng); break;
        case TDM_DOUBLE: ((double *)p)[i] = rng_unit(rng); break;
        case TDM_FLOAT16: ((uint16_t *)p)[i] = cli_f32_to_f16((float)rng_unit(rng)); break;
        case TDM_BFLOAT16: ((uint16_t *)p)[i] = cli_f32_to_bf16((float)rng_unit(rng)); break;
        case TDM_COMPLEX64:
            ((float *)p)[2 * i] = (float)rng_unit(rng);
            ((float *)p)[2 * i + 1] = (float)rng_unit(rng);
            break;
        case TDM_COMPLEX128:
            ((double *)p)[2 * i] = rng_unit(rng);
            ((double *)p)[2 * i + 1] = rng_unit(rng);
            break;
        case TDM_INT8: case TDM_INT4: ((int8_t *)p)[i] = (int8_t)r10; break;
        case TDM_UINT8: case TDM_UINT4: ((uint8_t *)p)[i] = (uint8_t)r10; break;
        case TDM_INT16: ((int16_t *)p)[i] = (int16_t)r10; break;
        case TDM_UINT16: ((uint16_t *)p)[i] = (uint16_t)r10; break;
        case TDM_INT32: ((int32_t *)p)[i] = (int32_t)r10; break;
        case TDM_UINT32: ((uint32_t *)p)[i] = (uint32_t)r10; break;
        case TDM_INT64: ((int64_t *)p)[i] = (int64_t)r10; break;
        case TDM_UINT64: ((uint64_t *)p)[i] = r10; break;
        case TDM_BOOL: ((uint8_t *)p)[i] = (uint8_t)(cli_rng_next(rng) >> 63); break;
        case TDM_STRING: {
            char digit = (char)('0' + r10);
            if (tdm_tensor_set_string(t, i, &digit, 1)) {
                cli_error("out of memory");
                return EXIT_INVALID;
            }
            break;
        }
        case TDM_UNDEFINED:
        case TDM_FLOAT8E4M3FN:
        case TDM_FLOAT8E4M3FNUZ:
        case TDM_FLOAT8E5M2:
        case TDM_FLOAT8E5M2FNUZ:
        case TDM_FLOAT4E2M1:
        case TDM_FLOAT8E8M0:
        case TDM_UINT2:
        case TDM_INT2:
            cli_error("input '%s': %s cannot make %s values; give --input %s=FILE", name, filler,
                      tdm_dtype_name(dt), name);
            return EXIT_INVALID;
        }
    }
    return 0;
}

int cli_random_input(const tdm_value_info *vi, int shape_rank, const int64_t *shape_dims, const char *filler,
                     uint64_t *rng, tdm_tensor **out)
{
    *out = NULL;
    if (vi->kind == TDM_KIND_SEQUENCE) {
        cli_error("input '%s' is a sequence, which %s cannot make; give --input %s=FILE", vi->name, filler,
                  vi->name);
        return EXIT_INVALID;
    }
    if (vi->dtype == TDM_UNDEFINED) {
        cli_error("input '%s' has no declared element type, so %s cannot make it; give --input %s=FILE", vi->name,
                  filler, vi->name);
        return EXIT_INVALID;
    }
    int rank = vi->rank;
    int64_t dims[CLI_MAX_RANK] = {0};
    for (int d = 0; d < rank && d < CLI_MAX_RANK; d++)
        dims[d] = vi->dims[d].value;
    if (shape_rank >= 0) {
        if (rank >= 0 && shape_rank != rank) {
            cli_error("--shape gives input '%s' rank %d, the model declares rank %d", vi->name, shape_rank, rank);
            return EXIT_INVALID;
        }
        for (int d = 0; d < shape_rank; d++)
            if (shape_dims[d] >= 0 || rank < 0)
                dims[d] = shape_dims[d];
        rank = shape_rank;
    }
    if (rank < 0) {
        cli_error("input '%s' has an unknown rank, so %s needs its shape: give --shape %s=DxD...", vi->name, filler,
                  vi->name);
        return EXIT_INVALID;
    }
    if (rank > CLI_MAX_RANK) {
        cli_error("input '%s' has rank %d, more than the tool handles (%d)", vi->name, rank, CLI_MAX_RANK);
        return EXIT_INVALID;
    }
    for (int d = 0; d < rank; d++) {
        if (dims[d] >= 0)
            continue;
        /* A template for the fix: known dimensions kept, the others 'D'. */
        char tmpl[256];
        size_t off = 0;
        for (int k = 0; k < rank && off < sizeof tmpl; k++) {
            int w = dims[k] >= 0 ? snprintf(tmpl + off, sizeof tmpl - off, k ? "x%lld" : "%lld", (long long)dims[k])
                                 : snprintf(tmpl + off, sizeof tmpl - off, k ? "xD" : "D");
            if (w < 0)
                break;
            off += (size_t)w;
        }
        const char *sym = d < vi->rank ? vi->dims[d].symbol : NULL;
        if (sym && *sym)
            cli_error("input '%s' has dynamic dimension '%s' (axis %d), so %s needs it fixed: give --shape %s=%s",
                      vi->name, sym, d, filler, vi->name, tmpl);
        else
            cli_error("input '%s' has a dynamic dimension (axis %d), so %s needs it fixed: give --shape %s=%s",
                      vi->name, d, filler, vi->name, tmpl);
        return EXIT_INVALID;
    }
    tdm_tensor *t;
    tdm_status st = tdm_tensor_create(vi->dtype, rank, dims, &t);
    if (st) {
        char sbuf[256];
        cli_error("input '%s': cannot make a random %s tensor of shape %s (%s)", vi->name,
                  tdm_dtype_name(vi->dtype), cli_shape_str(rank, dims, sbuf, sizeof sbuf), tdm_status_str(st));
        return cli_exit_code(st);
    }
    int rc = fill_random(t, rng, vi->name, filler);
    if (rc) {
        tdm_tensor_destroy(t);
        return rc;
    }
    *out = t;
    return 0;
}

int cli_opt_value(const char *cmd, int argc, char **argv, int *i, const char *opt, const char **val)
{
    const char *a = argv[*i];
    size_t l = strlen(opt);
    if (strncmp(a, opt, l) != 0 || (a[l] != '\0' && a[l] != '='))
        return 0;
    if (a[l] == '=') {
        *val = a + l + 1;
        return 1;
    }
    if (*i + 1 >= argc) {
        cli_error("%s: option '%s' needs a value; see `tandem %s --help`", cmd, opt, cmd);
        return -1;
    }
    *val = argv[++*i];
    return 1;
}

int cli_kv_unique(const char *cmd, const char *opt, const cli_kv *kv, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(kv[i].name, kv[j].name) == 0) {
                cli_error("%s: input '%s' is given twice with %s", cmd, kv[i].name, opt);
                return EXIT_USAGE;
            }
    return 0;
}

int cli_split_kv(const char *cmd, const char *opt, const char *s, cli_kv *out)
{
    const char *eq = strrchr(s, '=');
    if (!eq || eq == s) {
        cli_error("%s: %s expects NAME=%s, not '%s'", cmd, opt, strcmp(opt, "--shape") == 0 ? "DxD..." : "FILE", s);
        return -1;
    }
    size_t nl = (size_t)(eq - s);
    char *name = malloc(nl + 1);
    if (!name) {
        cli_error("out of memory");
        return -1;
    }
    memcpy(name, s, nl);
    name[nl] = '\0';
    out->owned = name;
    out->name = name;
    out->value = eq + 1;
    return 0;
}

int cli_push_str(const char ***arr, size_t *n, const char *v)
{
    const char **a = realloc((void *)*arr, (*n + 1) * sizeof **arr);
    if (!a)
        return -1;
    a[(*n)++] = v;
    *arr = a;
    return 0;
}

int cli_threads(const char *cmd, const char *val, long long *out)
{
    const char *what = "--threads";
    *out = 0;
    if (!val) {
        val = getenv("TANDEM_THREADS");
        what = "the environment variable TANDEM_THREADS";
        if (!val || !*val)
            return 0;
    }
    if (cli_parse_i64(val, out) || *out < 0 || *out > 4096) {
        cli_error("%s: %s expects a number from 0 to 4096, not '%s'", cmd, what, val);
        return -1;
    }
    return 0;
}

size_t cli_emulated(const tdm_plan *plan, char *buf, size_t size, double *modeled_ms)
{
    size_t n = 0, off = 0;
    tdm_plan_summary sum;
    buf[0] = '\0';
    *modeled_ms = -1;
    for (size_t d = 0; d < tdm_plan_device_count(plan); d++) {
        const char *name = tdm_plan_device_name(plan, d);
        if (strncmp(name, "vnpu:", 5) != 0 || !tdm_plan_device_nodes(plan, d))
            continue;
        int w = snprintf(buf + off, size - off, "%s%s", n ? ", " : "", name);
        if (w > 0 && (size_t)w < size - off)
            off += (size_t)w;
        n++;
    }
    if (n && tdm_plan_get_summary(plan, &sum) == TDM_OK && sum.estimates_complete)
        *modeled_ms = sum.estimated_ms;
    return n;
}

size_t cli_device_width(const tdm_plan *plan)
{
    size_t w = 6;
    for (size_t d = 0; d < tdm_plan_device_count(plan); d++) {
        size_t l = strlen(tdm_plan_device_name(plan, d));
        w = l > w ? l : w;
    }
    return w;
}

static uint64_t progress_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void cli_progress_begin(cli_progress *p, const char *cmd)
{
    memset(p, 0, sizeof *p);
    p->cmd = cmd;
    p->tty = isatty(fileno(stderr));
    p->start_ns = progress_now_ns();
}

void cli_progress_step(cli_progress *p, size_t done, size_t total, const char *what)
{
    if (!p->tty)
        return;
    uint64_t now = progress_now_ns();
    /* only past two seconds, and at most ten updates a second */
    if (now - p->start_ns < 2000000000u || (p->width && now - p->last_ns < 100000000u))
        return;
    p->last_ns = now;
    char line[80]; /* one terminal line */
    int n = total ? snprintf(line, sizeof line, "%s: %3zu%% [%zu/%zu] %s", p->cmd, done * 100 / total, done, total,
                             what ? what : "")
                  : snprintf(line, sizeof line, "%s: %zu %s", p->cmd, done, what ? what : "");
    if (n < 0)
        return;
    size_t len = strlen(line); /* snprintf may have cut it */
    /* pad with spaces over what the previous, longer line left */
    fprintf(stderr, "\r%s%*s", line, p->width > len ? (int)(p->width - len) : 0, "");
    fflush(stderr);
    if (len > p->width)
        p->width = len;
}

void cli_progress_end(cli_progress *p)
{
    if (!p->tty || !p->width)
        return;
    fprintf(stderr, "\r%*s\r", (int)p->width, "");
    fflush(stderr);
    p->width = 0;
}

void cli_progress_fn(void *user, size_t done, size_t total, const char *what)
{
    cli_progress_step(user, done, total, what);
}
