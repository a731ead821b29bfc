/* Shared helpers of the tool: errors, exit codes, number parsing, type and
 * shape strings, half-precision conversions. */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

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

static void print_wrapped(const char *msg)
{
    size_t len = strlen(msg);
    size_t first = 1;
    const char *p = msg;
    fputs("tandem: ", stderr);
    while (len > 0) {
        size_t take = len;
        if (len > LINE_MAX_CHARS) {
            /* Cut at the last space within the limit (or hard at it). */
            take = LINE_MAX_CHARS;
            while (take > LINE_MAX_CHARS / 2 && p[take] != ' ')
                take--;
            if (p[take] != ' ')
                take = LINE_MAX_CHARS;
        }
        if (!first)
            fputs("  ", stderr);
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
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    print_wrapped(buf);
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
