/* NumPy .npy files: read and write (tdm_value_load, which also reads ONNX
 * .pb values, is in onnx/value_load.c, above the loader). The .npy header is a Python dict literal; it is
 * parsed by a small bounded tokenizer that accepts exactly what numpy
 * writes (and reasonable hand-written variants) and refuses the rest with a
 * sentence naming the file. */
#define _POSIX_C_SOURCE 200809L

#include "core/npy.h"
#include "core/ctx.h"
#include "core/file.h"
#include "core/mem.h"
#include "core/tensor.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
/* Headers beyond this are not something numpy writes for a plain array. */
#define NPY_HEADER_MAX (1u << 20)

/* ------------------------------------------------------- header tokenizer */

typedef struct hdr_parser {
    const char *s;
    size_t n, i;
} hdr_parser;

static void hp_ws(hdr_parser *p)
{
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static int hp_peek(hdr_parser *p)
{
    hp_ws(p);
    return p->i < p->n ? (unsigned char)p->s[p->i] : -1;
}

static int hp_eat(hdr_parser *p, char c)
{
    if (hp_peek(p) != (unsigned char)c)
        return 0;
    p->i++;
    return 1;
}

/* A quoted string without escapes ('…' or "…") into buf. */
static int hp_string(hdr_parser *p, char *buf, size_t size)
{
    int q = hp_peek(p);
    if (q != '\'' && q != '"')
        return 0;
    p->i++;
    size_t k = 0;
    while (p->i < p->n && p->s[p->i] != (char)q) {
        if (p->s[p->i] == '\\' || k + 1 >= size)
            return 0;
        buf[k++] = p->s[p->i++];
    }
    if (p->i >= p->n)
        return 0;
    p->i++;
    buf[k] = '\0';
    return 1;
}

static int hp_word(hdr_parser *p, const char *w)
{
    size_t l = strlen(w);
    hp_ws(p);
    if (p->n - p->i < l || memcmp(p->s + p->i, w, l) != 0)
        return 0;
    p->i += l;
    return 1;
}

/* A non-negative integer (Python 2 files may append 'L'). */
static int hp_int(hdr_parser *p, int64_t *out)
{
    hp_ws(p);
    int64_t v = 0;
    size_t start = p->i;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
        int d = p->s[p->i] - '0';
        if (v > (INT64_MAX - d) / 10)
            return 0;
        v = v * 10 + d;
        p->i++;
    }
    if (p->i == start)
        return 0;
    if (p->i < p->n && p->s[p->i] == 'L')
        p->i++;
    *out = v;
    return 1;
}

typedef struct npy_header {
    char descr[64];
    int fortran;
    int rank;
    int64_t dims[TDM_MAX_RANK];
} npy_header;

/* Parses the dict. Returns TDM_OK or a status with a sentence on e. */
static tdm_status parse_header(tdm_err *e, const char *path, const char *s, size_t n, npy_header *h)
{
    hdr_parser p = {s, n, 0};
    int have_descr = 0, have_fortran = 0, have_shape = 0;
    memset(h, 0, sizeof *h);
    if (!hp_eat(&p, '{'))
        return err_set(e, TDM_E_INPUT, "'%s' is not a valid .npy file: its header is not a dict", path);
    while (!hp_eat(&p, '}')) {
        char key[32];
        if (!hp_string(&p, key, sizeof key) || !hp_eat(&p, ':'))
            return err_set(e, TDM_E_INPUT, "'%s' is not a valid .npy file: malformed header near byte %zu",
                           path, p.i);
        if (strcmp(key, "descr") == 0) {
            if (have_descr++)
                return err_set(e, TDM_E_INPUT, "'%s' is not a valid .npy file: 'descr' appears twice", path);
            if (hp_peek(&p) == '[')
                return err_set(e, TDM_E_INPUT, "'%s' holds a structured array, which tandem does not read", path);
            if (!hp_string(&p, h->descr, sizeof h->descr))
                return err_set(e, TDM_E_INPUT, "'%s' is not a valid .npy file: malformed 'descr'", path);
        } else if (strcmp(key, "fortran_order") == 0) {
            if (have_fortran++)
                return err_set(e, TDM_E_INPUT, "'%s' is not a valid .npy file: 'fortran_order' appears twice",
                               path);
            if (hp_word(&p, "True"))
                h->fortran = 1;
            else if (hp_word(&p, "False"))
                h->fortran = 0;
            else
                return err_set(e, TDM_E_INPUT, "'%s' is not a valid .npy file: malformed 'fortran_order'", path);
        } else if (strcmp(key, "shape") == 0) {
            if (have_shape++)
                return err_set(e, TDM_E_INPUT, "'%s' is not a valid .npy file: 'shape' appears twice", path);
            if (!hp_eat(&p, '('))
                return err_set(e, TDM_E_INPUT, "'%s' is not a valid .npy file: malformed 'shape'", path);
            while (!hp_eat(&p, ')')) {
                int64_t d;
                if (!hp_int(&p, &d))
                    return err_set(e, TDM_E_INPUT, "'%s' is not a valid .npy file: malformed 'shape'", path);
                if (h->rank >= TDM_MAX_RANK)
                    return err_set(e, TDM_E_INPUT, "'%s' has more than %d dimensions", path, TDM_MAX_RANK);
                h->dims[h->rank++] = d;
                if (!hp_eat(&p, ',') && hp_peek(&p) != ')')
                    return err_set(e, TDM_E_INPUT, "'%s' is not a valid .npy file: malformed 'shape'", path);
            }
        } else {
            return err_set(e, TDM_E_INPUT, "'%s' is not a valid .npy file: unknown header key '%s'", path, key);
        }
        if (!hp_eat(&p, ',') && hp_peek(&p) != '}')
            return err_set(e, TDM_E_INPUT, "'%s' is not a valid .npy file: malformed header near byte %zu", path,
                           p.i);
    }
    /* After the dict: only padding (spaces, newline; numpy may pad with NULs
     * in very old files). */
    for (; p.i < n; p.i++)
        if (s[p.i] != ' ' && s[p.i] != '\n' && s[p.i] != '\t' && s[p.i] != '\r' && s[p.i] != '\0')
            return err_set(e, TDM_E_INPUT, "'%s' is not a valid .npy file: junk after the header dict", path);
    if (!have_descr || !have_fortran || !have_shape)
        return err_set(e, TDM_E_INPUT, "'%s' is not a valid .npy file: its header lacks '%s'", path,
                       !have_descr ? "descr" : !have_fortran ? "fortran_order" : "shape");
    if (h->fortran)
        return err_set(e, TDM_E_INPUT,
                       "'%s' is stored in Fortran order, which tandem does not read; save it with "
                       "numpy.ascontiguousarray",
                       path);
    return TDM_OK;
}

/* Element kinds of a descr. */
enum { EK_PLAIN, EK_UNICODE, EK_BYTES };

/* Maps a descr to a dtype. *esize is the file's bytes per element;
 * *swap is set when the data is in the other byte order than the host. */
static tdm_status parse_descr(tdm_err *e, const char *path, const char *d, tdm_dtype *dt, int *ek, size_t *esize,
                              int *swap)
{
    char order = d[0];
    if (order != '<' && order != '>' && order != '|' && order != '=')
        return err_set(e, TDM_E_INPUT, "'%s' has element type '%s', which tandem does not read", path, d);
    if (order == '>')
        return err_set(e, TDM_E_INPUT,
                       "'%s' is big-endian ('%s'); tandem reads little-endian .npy only (use "
                       "arr.astype(arr.dtype.newbyteorder('<')))",
                       path, d);
    const char *t = d + 1;
    *swap = order == '<' ? !host_is_le() : 0;
    *ek = EK_PLAIN;
    if (t[0] == 'U' || t[0] == 'S') {
        int64_t n = 0;
        hdr_parser p = {t + 1, strlen(t + 1), 0};
        if (!hp_int(&p, &n) || p.i != p.n || n > (1 << 24))
            return err_set(e, TDM_E_INPUT, "'%s' has a malformed string element type '%s'", path, d);
        *dt = TDM_STRING;
        *ek = t[0] == 'U' ? EK_UNICODE : EK_BYTES;
        *esize = (size_t)n * (t[0] == 'U' ? 4u : 1u);
        return TDM_OK;
    }
    static const struct {
        const char *code;
        tdm_dtype dt;
    } map[] = {
        {"f2", TDM_FLOAT16}, {"f4", TDM_FLOAT},  {"f8", TDM_DOUBLE},   {"i1", TDM_INT8},       {"i2", TDM_INT16},
        {"i4", TDM_INT32},   {"i8", TDM_INT64},  {"u1", TDM_UINT8},    {"u2", TDM_UINT16},     {"u4", TDM_UINT32},
        {"u8", TDM_UINT64},  {"b1", TDM_BOOL},   {"?", TDM_BOOL},      {"c8", TDM_COMPLEX64},  {"c16", TDM_COMPLEX128},
        {"e", TDM_FLOAT16},  {"f", TDM_FLOAT},   {"d", TDM_DOUBLE},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (strcmp(t, map[i].code) == 0) {
            *dt = map[i].dt;
            *esize = tdm_dtype_size(map[i].dt);
            if (*esize == 1)
                *swap = 0;
            return TDM_OK;
        }
    }
    if (t[0] == 'O')
        return err_set(e, TDM_E_INPUT, "'%s' holds Python objects (pickled), which tandem does not read", path);
    return err_set(e, TDM_E_INPUT, "'%s' has element type '%s', which tandem does not read", path, d);
}

/* UTF-8 encoding of one code point into o (4 bytes at most); returns the
 * length, or 0 for a value that is not a Unicode scalar. */
static size_t utf8_put(uint32_t c, char *o)
{
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c >= 0xD800 && c <= 0xDFFF)
        return 0;
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12));
        o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    if (c <= 0x10FFFF) {
        o[0] = (char)(0xF0 | (c >> 18));
        o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
        o[2] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[3] = (char)(0x80 | (c & 0x3F));
        return 4;
    }
    return 0;
}

static tdm_status decode_strings(tdm_err *e, const char *path, tdm_tensor *t, const unsigned char *data, int ek,
                                 size_t esize)
{
    size_t width = ek == EK_UNICODE ? esize / 4 : esize;
    size_t cap;
    if (mem_mul(width, 4, &cap) || mem_add(cap, 1, &cap))
        return err_set(e, TDM_E_NOMEM, "'%s': string elements are too wide", path);
    char *buf = mem_alloc(cap);
    if (!buf)
        return err_set(e, TDM_E_NOMEM, "out of memory reading '%s'", path);
    char **arr = t->data;
    for (size_t i = 0; i < t->count; i++) {
        const unsigned char *el = data + i * esize;
        size_t len = 0;
        for (size_t k = 0; k < width; k++) {
            uint32_t c;
            if (ek == EK_UNICODE)
                c = (uint32_t)el[4 * k] | (uint32_t)el[4 * k + 1] << 8 | (uint32_t)el[4 * k + 2] << 16 |
                    (uint32_t)el[4 * k + 3] << 24;
            else
                c = el[k];
            if (c == 0)
                break; /* numpy pads with NULs; a string ends at the first */
            if (ek == EK_BYTES) {
                buf[len++] = (char)c;
                continue;
            }
            size_t w = utf8_put(c, buf + len);
            if (!w) {
                mem_free(buf);
                return err_set(e, TDM_E_INPUT, "'%s': element %zu holds U+%lX, which is not a Unicode character",
                               path, i, (unsigned long)c);
            }
            len += w;
        }
        if (!(arr[i] = mem_strndup(buf, len))) {
            mem_free(buf);
            return err_set(e, TDM_E_NOMEM, "out of memory reading '%s'", path);
        }
    }
    mem_free(buf);
    return TDM_OK;
}

tdm_status npy_decode(tdm_err *e, const char *path, const void *bytes, size_t size, tdm_tensor **out)
{
    const unsigned char *b = bytes;
    *out = NULL;
    if (size < 10 || memcmp(b, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return err_set(e, TDM_E_INPUT, "'%s' is not a .npy file (no \\x93NUMPY magic)", path);
    unsigned major = b[6], minor = b[7];
    size_t hlen, hstart;
    if (major == 1) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (size < 12)
            return err_set(e, TDM_E_INPUT, "'%s' is truncated inside its .npy header", path);
        uint32_t l = (uint32_t)b[8] | (uint32_t)b[9] << 8 | (uint32_t)b[10] << 16 | (uint32_t)b[11] << 24;
        hlen = l;
        hstart = 12;
    } else {
        return err_set(e, TDM_E_INPUT, "'%s' uses .npy format %u.%u; tandem reads 1.0, 2.0 and 3.0", path, major,
                       minor);
    }
    if (hlen > NPY_HEADER_MAX || hlen > size - hstart)
        return err_set(e, TDM_E_INPUT, "'%s' is truncated: its header claims %zu bytes", path, hlen);
    npy_header h;
    tdm_status st = parse_header(e, path, (const char *)b + hstart, hlen, &h);
    if (st)
        return st;
    tdm_dtype dt;
    int ek = EK_PLAIN, swap = 0;
    size_t esize = 0;
    if ((st = parse_descr(e, path, h.descr, &dt, &ek, &esize, &swap)) != TDM_OK)
        return st;
    size_t count, need;
    char sbuf[256];
    if (shape_count(h.rank, h.dims, &count) || mem_mul(count, esize, &need))
        return err_set(e, TDM_E_INPUT, "'%s' has shape %s, which is too large", path,
                       shape_str(h.rank, h.dims, sbuf, sizeof sbuf));
    size_t have = size - hstart - hlen;
    if (have != need)
        return err_set(e, TDM_E_INPUT, "'%s' holds %zu bytes of data, but its header (shape %s, '%s') needs %zu",
                       path, have, shape_str(h.rank, h.dims, sbuf, sizeof sbuf), h.descr, need);
    const unsigned char *data = b + hstart + hlen;
    tdm_tensor *t;
    if ((st = tensor_new(e, dt, h.rank, h.dims, &t)) != TDM_OK) {
        err_prefix(e, "'%s': ", path);
        return st;
    }
    if (dt == TDM_STRING) {
        if ((st = decode_strings(e, path, t, data, ek, esize)) != TDM_OK) {
            tdm_tensor_destroy(t);
            return st;
        }
    } else if (t->nbytes) {
        memcpy(t->data, data, t->nbytes);
        if (swap)
            tensor_swap_le(t->data, dt, count);
        if (dt == TDM_BOOL) {
            unsigned char *p = t->data;
            for (size_t i = 0; i < count; i++)
                p[i] = p[i] != 0;
        }
    }
    *out = t;
    return TDM_OK;
}

tdm_status npy_sniff_file(tdm_err *e, const char *path, int *is_npy)
{
    /* through the one gate, so that a FIFO or a device is refused here too */
    int fd;
    uint64_t fsize;
    unsigned char m[NPY_MAGIC_LEN];
    *is_npy = 0;
    tdm_status st = file_open(e, &file_value_npy, path, &fd, &fsize);
    if (st)
        return st;
    *is_npy = fsize >= sizeof m && file_pread(fd, m, sizeof m, 0) == 0 && memcmp(m, NPY_MAGIC, NPY_MAGIC_LEN) == 0;
    close(fd);
    return TDM_OK;
}

tdm_status npy_load_file(tdm_err *e, const char *path, tdm_tensor **out)
{
    file_data fd;
    tdm_status st = file_load(e, &file_value_npy, path, &fd);
    if (st)
        return st;
    st = npy_decode(e, path, fd.data, fd.size, out);
    file_release(&fd);
    return st;
}

/* ------------------------------------------------------------------ writing */

/* Decodes one UTF-8 sequence at s (len bytes left); a malformed byte
 * stands for itself (as Latin-1), so that nothing is lost silently. */
static uint32_t utf8_get(const unsigned char *s, size_t len, size_t *used)
{
    unsigned c = s[0];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || n > len) {
        *used = 1;
        return c;
    }
    uint32_t v = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < n; k++) {
        if ((s[k] & 0xC0) != 0x80) {
            *used = 1;
            return c;
        }
        v = v << 6 | (s[k] & 0x3F);
    }
    *used = n;
    return v;
}

static size_t utf8_codepoints(const char *s)
{
    size_t n = 0, len = strlen(s);
    const unsigned char *p = (const unsigned char *)s;
    while (len) {
        size_t u;
        utf8_get(p, len, &u);
        p += u;
        len -= u;
        n++;
    }
    return n;
}

static const char *npy_descr(tdm_dtype dt)
{
    switch (dt) {
    case TDM_FLOAT: return "<f4";
    case TDM_DOUBLE: return "<f8";
    case TDM_FLOAT16: return "<f2";
    case TDM_BFLOAT16: return "<u2";
    case TDM_INT8: case TDM_INT4: case TDM_INT2: return "|i1";
    case TDM_UINT8: case TDM_UINT4: case TDM_UINT2: return "|u1";
    case TDM_FLOAT8E4M3FN: case TDM_FLOAT8E4M3FNUZ: case TDM_FLOAT8E5M2: case TDM_FLOAT8E5M2FNUZ: return "|u1";
    case TDM_FLOAT4E2M1: case TDM_FLOAT8E8M0: return "|u1";
    case TDM_INT16: return "<i2";
    case TDM_UINT16: return "<u2";
    case TDM_INT32: return "<i4";
    case TDM_UINT32: return "<u4";
    case TDM_INT64: return "<i8";
    case TDM_UINT64: return "<u8";
    case TDM_BOOL: return "|b1";
    case TDM_COMPLEX64: return "<c8";
    case TDM_COMPLEX128: return "<c16";
    case TDM_STRING: case TDM_UNDEFINED: return NULL;
    }
    return NULL;
}

tdm_status npy_encode(tdm_err *e, const tdm_tensor *t, unsigned char **out, size_t *size)
{
    *out = NULL;
    *size = 0;
    if (t->kind != TDM_KIND_TENSOR)
        return err_set(e, TDM_E_USAGE, "only a tensor can be written as .npy, not a %s",
                       t->kind == TDM_KIND_SEQUENCE ? "sequence" : "absent optional");
    char descr[32];
    size_t width = 0, esize;
    if (t->dtype == TDM_STRING) {
        for (size_t i = 0; i < t->count; i++) {
            size_t n = utf8_codepoints(tensor_str(t, i));
            if (n > width)
                width = n;
        }
        if (width == 0)
            width = 1;
        snprintf(descr, sizeof descr, "<U%zu", width);
        if (mem_mul(width, 4, &esize))
            return err_set(e, TDM_E_NOMEM, "a string is too long to write as .npy");
    } else {
        const char *d = npy_descr(t->dtype);
        if (!d)
            return err_set(e, TDM_E_UNSUPPORTED, "element type %s cannot be written as .npy",
                           tdm_dtype_name(t->dtype));
        snprintf(descr, sizeof descr, "%s", d);
        esize = tdm_dtype_size(t->dtype);
    }
    /* The dict, then padding so that data starts on a 64-byte boundary. */
    char dict[128 + TDM_MAX_RANK * 24];
    size_t off = (size_t)snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int d = 0; d < t->rank; d++)
        off += (size_t)snprintf(dict + off, sizeof dict - off, "%lld,%s", (long long)t->dims[d],
                                d + 1 < t->rank ? " " : "");
    if (t->rank > 1)
        off--; /* "(2, 3,)" → numpy writes "(2, 3)" */
    off += (size_t)snprintf(dict + off, sizeof dict - off, "), }");
    size_t pre = 10, total = pre + off + 1;
    size_t padded = (total + 63) / 64 * 64;
    size_t hlen = padded - pre;
    size_t count = t->count, dbytes;
    if (mem_mul(count, esize, &dbytes) || mem_add(padded, dbytes, size)) {
        return err_set(e, TDM_E_NOMEM, "the tensor is too large to write as .npy");
    }
    unsigned char *buf = mem_alloc(*size);
    if (!buf)
        return err_set(e, TDM_E_NOMEM, "out of memory writing .npy");
    memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (unsigned char)(hlen & 0xFF);
    buf[9] = (unsigned char)(hlen >> 8);
    memcpy(buf + pre, dict, off);
    memset(buf + pre + off, ' ', hlen - off - 1);
    buf[padded - 1] = '\n';
    unsigned char *data = buf + padded;
    if (t->dtype == TDM_STRING) {
        memset(data, 0, dbytes);
        for (size_t i = 0; i < count; i++) {
            const unsigned char *s = (const unsigned char *)tensor_str(t, i);
            size_t len = strlen((const char *)s), k = 0;
            unsigned char *el = data + i * esize;
            while (len) {
                size_t u;
                uint32_t c = utf8_get(s, len, &u);
                s += u;
                len -= u;
                el[4 * k] = (unsigned char)(c & 0xFF);
                el[4 * k + 1] = (unsigned char)(c >> 8 & 0xFF);
                el[4 * k + 2] = (unsigned char)(c >> 16 & 0xFF);
                el[4 * k + 3] = (unsigned char)(c >> 24 & 0xFF);
                k++;
            }
        }
    } else if (dbytes) {
        memcpy(data, t->data, dbytes);
        tensor_swap_le(data, t->dtype, count);
        if (t->dtype == TDM_BOOL)
            for (size_t i = 0; i < count; i++)
                data[i] = data[i] != 0;
    }
    *out = buf;
    return TDM_OK;
}

/* Writes size bytes to a fresh temporary file next to path. The file is
 * created with O_EXCL and mode 0666, so the umask applies as for any new
 * file (and the library never has to touch the process-wide umask). */
static tdm_status write_temp(tdm_err *e, const char *path, const unsigned char *buf, size_t size, char **tmp_out)
{
    *tmp_out = NULL;
    size_t pl = strlen(path), tl;
    if (mem_add(pl, 64, &tl))
        return err_set(e, TDM_E_NOMEM, "path too long");
    char *tmp = mem_alloc(tl);
    if (!tmp)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    int fd = -1, err = 0;
    unsigned long salt = (unsigned long)(uintptr_t)&fd ^ (unsigned long)clock();
    for (unsigned attempt = 0; attempt < 100 && fd < 0; attempt++) {
        salt = salt * 6364136223846793005ul + 1442695040888963407ul;
        snprintf(tmp, tl, "%s.tmp-%ld-%08lx", path, (long)getpid(), (salt >> 16) & 0xFFFFFFFFul);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
        err = errno;
        if (fd < 0 && err != EEXIST)
            break;
    }
    if (fd < 0) {
        mem_free(tmp);
        return err_set(e, TDM_E_IO, "cannot write '%s': %s", path, strerror(err));
    }
    size_t off = 0;
    err = 0;
    while (off < size) {
        ssize_t w = write(fd, buf + off, size - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            err = w < 0 ? errno : EIO;
            break;
        }
        off += (size_t)w;
    }
    if (close(fd) != 0 && !err)
        err = errno ? errno : EIO;
    if (err) {
        unlink(tmp);
        mem_free(tmp);
        return err_set(e, TDM_E_IO, "cannot write '%s': %s", path, strerror(err));
    }
    *tmp_out = tmp;
    return TDM_OK;
}

tdm_status npy_write_file(tdm_err *e, const tdm_tensor *t, const char *path, int overwrite)
{
    unsigned char *buf;
    size_t size;
    struct stat sb;
    if (!overwrite && stat(path, &sb) == 0)
        return err_set(e, TDM_E_IO, "'%s' exists; not overwriting it", path);
    tdm_status st = npy_encode(e, t, &buf, &size);
    if (st) {
        err_prefix(e, "cannot write '%s': ", path);
        return st;
    }
    st = npy_write_bytes(e, path, buf, size, overwrite);
    mem_free(buf);
    return st;
}

tdm_status npy_write_bytes(tdm_err *e, const char *path, const unsigned char *buf, size_t size, int overwrite)
{
    char *tmp;
    tdm_status st = write_temp(e, path, buf, size, &tmp);
    if (st)
        return st;
    int rc = 0, err = 0;
    if (overwrite) {
        rc = rename(tmp, path);
        err = errno;
    } else {
        /* link() fails when path exists, so a file that appeared since the
         * check above is still not replaced. A file system without hard
         * links falls back to rename (the check above stands). */
        rc = link(tmp, path);
        err = errno;
        if (rc != 0 && (err == EPERM || err == ENOTSUP || err == EXDEV)) {
            rc = rename(tmp, path);
            err = errno;
        }
    }
    unlink(tmp); /* after link(); harmless after rename() */
    mem_free(tmp);
    if (rc == 0)
        return TDM_OK;
    if (err == EEXIST)
        return err_set(e, TDM_E_IO, "'%s' exists; not overwriting it", path);
    return err_set(e, TDM_E_IO, "cannot write '%s': %s", path, strerror(err));
}

tdm_status tdm_tensor_save_npy(tdm_ctx *ctx, const tdm_tensor *t, const char *path, int overwrite)
{
    tdm_err *e = ctx ? &ctx->err : NULL;
    err_clear(e);
    if (!t || !path)
        return err_set(e, TDM_E_USAGE, "tdm_tensor_save_npy needs a tensor and a path");
    return npy_write_file(e, t, path, overwrite);
}
