/* TensorProto and SparseTensorProto → tdm_tensor, with external data. */
#define _DEFAULT_SOURCE
#include "onnx/internal.h"
#include "core/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void onnx_ctx_free(onnx_ctx *c)
{
    /* rdir comes from realpath(), i.e. malloc */
    free(c->rdir);
    c->rdir = NULL;
}

/* One value of a packed type (dtype_packed_bits bits, low bits first)
 * from its byte: int4 and int2 sign-extended, the others as they are. */
static uint8_t unpack_one(unsigned byte, size_t i, tdm_dtype dt)
{
    int bits = dtype_packed_bits(dt), per = 8 / bits;
    unsigned mask = (1u << bits) - 1u, half = 1u << (bits - 1);
    unsigned v = (byte >> (bits * (int)(i % (size_t)per))) & mask;
    if (dt == TDM_INT4 || dt == TDM_INT2)
        return (uint8_t)(int8_t)((int)(v ^ half) - (int)half);
    return (uint8_t)v;
}

/* Bytes that hold count values of a packed type. */
static size_t packed_bytes(tdm_dtype dt, size_t count)
{
    size_t per = (size_t)(8 / dtype_packed_bits(dt));
    return count / per + (count % per != 0);
}

/* Packed values → one per byte. */
static void unpack(const uint8_t *src, size_t count, tdm_dtype dt, uint8_t *dst)
{
    size_t per = (size_t)(8 / dtype_packed_bits(dt));
    for (size_t i = 0; i < count; i++)
        dst[i] = unpack_one(src[i / per], i, dt);
}

/* ---- external data ---- */

static int parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (!s || !*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

static int has_dotdot(const char *p)
{
    for (const char *s = p; *s;) {
        const char *slash = strchr(s, '/');
        size_t n = slash ? (size_t)(slash - s) : strlen(s);
        if (n == 2 && s[0] == '.' && s[1] == '.')
            return 1;
        if (!slash)
            break;
        s = slash + 1;
    }
    return 0;
}

/* TANDEM_MMAP=0 in the environment: every weight is read into memory at
 * load, none stays mapped. A mapped file that is truncated or rewritten in
 * place while a model using it is loaded changes the weights or raises
 * SIGBUS on the next read; a service that replaces model files in place
 * (rather than by rename) sets this. */
static int mmap_allowed(void)
{
    const char *v = getenv("TANDEM_MMAP");
    return !(v && strcmp(v, "0") == 0);
}

int onnx_can_map(int dt, uint64_t at, size_t len)
{
    if (!mmap_allowed() || !dtype_valid(dt) || dt == TDM_STRING || dtype_packed_bits((tdm_dtype)dt) || !host_is_le() ||
        len < ONNX_MAP_MIN_BYTES)
        return 0;
    (void)at; /* misaligned bytes stay mapped too: the readers that load
               * elements align them (core/tensor.h tensor_align) */
    return tdm_dtype_size((tdm_dtype)dt) != 0;
}

/* The need bytes of external data for tp: mapped (*map set, *out inside
 * it) when onnx_can_map allows, else read into *out (mem_alloc'd). */
static tdm_status read_external(onnx_ctx *c, const Onnx__TensorProto *tp, const tdm_tensor *t, const char *what,
                                size_t need, void **out, file_map **map)
{
    tdm_err *e = c->e;
    const char *loc = NULL, *off_s = NULL, *len_s = NULL;
    *out = NULL;
    *map = NULL;
    if (!c->dir)
        return err_set(e, TDM_E_UNSUPPORTED,
                       "%s: %s uses external data, which a model read from memory cannot have", c->fname, what);
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *kv = tp->external_data[i];
        if (!kv->key)
            continue;
        if (strcmp(kv->key, "location") == 0)
            loc = kv->value;
        else if (strcmp(kv->key, "offset") == 0)
            off_s = kv->value;
        else if (strcmp(kv->key, "length") == 0)
            len_s = kv->value;
    }
    if (!loc || !*loc)
        return err_set(e, TDM_E_MODEL, "%s: %s has external data without a location", c->fname, what);
    if (loc[0] == '/')
        return err_set(e, TDM_E_MODEL, "%s: %s has external data at an absolute path ('%.64s'); it must be inside the model's folder",
                       c->fname, what, loc);
    if (has_dotdot(loc))
        return err_set(e, TDM_E_MODEL, "%s: %s has external data location '%.64s', which leaves the model's folder",
                       c->fname, what, loc);
    uint64_t off = 0, len = 0;
    if (off_s && parse_u64(off_s, &off))
        return err_set(e, TDM_E_MODEL, "%s: %s has external data offset '%.32s', which is not a number", c->fname, what,
                       off_s);
    if (len_s && parse_u64(len_s, &len))
        return err_set(e, TDM_E_MODEL, "%s: %s has external data length '%.32s', which is not a number", c->fname, what,
                       len_s);
    if (!c->rdir && !(c->rdir = realpath(c->dir, NULL)))
        return err_set(e, TDM_E_IO, "%s: the model's folder cannot be resolved: %s", c->fname, strerror(errno));
    size_t dl = strlen(c->dir), ll = strlen(loc), pl;
    if (mem_add(dl, ll, &pl) || mem_add(pl, 2, &pl))
        return err_set(e, TDM_E_NOMEM, "%s: %s: external data path is too long", c->fname, what);
    char *full = mem_alloc(pl);
    if (!full)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    memcpy(full, c->dir, dl);
    full[dl] = '/';
    memcpy(full + dl + 1, loc, ll + 1);
    char *real = realpath(full, NULL);
    int rerr = errno;
    mem_free(full);
    if (!real) {
        if (rerr == ENOENT || rerr == ENOTDIR)
            return err_set(e, TDM_E_IO, "%s: %s has its data in '%.64s', which does not exist", c->fname, what, loc);
        return err_set(e, TDM_E_IO, "%s: %s has its data in '%.64s', which cannot be resolved: %s", c->fname, what, loc,
                       strerror(rerr));
    }
    size_t rl = strlen(c->rdir);
    int inside = strncmp(real, c->rdir, rl) == 0 && (real[rl] == '/' || (rl == 1 && c->rdir[0] == '/'));
    if (!inside) {
        free(real);
        return err_set(e, TDM_E_MODEL, "%s: %s has its data in '%.64s', which resolves outside the model's folder",
                       c->fname, what, loc);
    }
    int fd;
    uint64_t fsize;
    tdm_status st = file_open(e, &file_external, real, &fd, &fsize);
    free(real);
    if (st) {
        err_prefix(e, "%s: %s: ", c->fname, what);
        return st;
    }
    if (off > fsize) {
        close(fd);
        return err_set(e, TDM_E_MODEL, "%s: %s has external data offset %llu past the end of '%.64s' (%llu bytes)",
                       c->fname, what, (unsigned long long)off, loc, (unsigned long long)fsize);
    }
    if (!len_s)
        len = fsize - off;
    if (len > fsize - off) {
        close(fd);
        return err_set(e, TDM_E_MODEL,
                       "%s: %s has external data of %llu bytes at offset %llu, past the end of '%.64s' (%llu bytes)",
                       c->fname, what, (unsigned long long)len, (unsigned long long)off, loc, (unsigned long long)fsize);
    }
    if (len != (uint64_t)need) {
        char shp[160];
        close(fd);
        return err_set(e, TDM_E_MODEL, "%s: %s has %llu bytes of external data, its dims %s of %s need %zu", c->fname,
                       what, (unsigned long long)len, shape_str(t->rank, t->dims, shp, sizeof shp),
                       tdm_dtype_name(t->dtype), need);
    }
    /* Mapped when it can be: only the pages a kernel reads become
     * resident, and they can be dropped again (tensor_drop_pages). The
     * offset's alignment within a page is the data's. */
    if (onnx_can_map(t->dtype, off, need)) {
        const uint8_t *at;
        file_map *m;
        if (file_map_range(fd, off, need, &m, &at)) {
            close(fd);
            return err_set(e, TDM_E_NOMEM, "%s: out of memory mapping %zu bytes of external data for %s", c->fname,
                           need, what);
        }
        if (m) {
            close(fd);
            *map = m;
            *out = (void *)(uintptr_t)at;
            return TDM_OK;
        }
    }
    uint8_t *buf = mem_alloc(need);
    if (!buf) {
        close(fd);
        return err_set(e, TDM_E_NOMEM, "%s: out of memory reading %zu bytes of external data for %s", c->fname, need,
                       what);
    }
    int err = file_pread(fd, buf, need, off);
    close(fd);
    if (err) {
        mem_free(buf);
        return err_set(e, TDM_E_IO, "%s: %s: reading external data '%.64s' failed: %s", c->fname, what, loc,
                       err == EIO ? "the file is shorter than it was" : strerror(err));
    }
    *out = buf;
    return TDM_OK;
}

/* ---- TensorProto ---- */

static tdm_status data_mismatch(onnx_ctx *c, const tdm_tensor *t, const char *what, size_t have, const char *unit,
                                const char *field, size_t need)
{
    char shp[160];
    shape_str(t->rank, t->dims, shp, sizeof shp);
    return err_set(c->e, TDM_E_MODEL, "%s: %s has %zu %s of %s, its dims %s of %s need %zu", c->fname, what, have, unit,
                   field, shp, tdm_dtype_name(t->dtype), need);
}

/* Sets t->data from the typed fields of tp. */
static tdm_status from_typed(onnx_ctx *c, Onnx__TensorProto *tp, tdm_tensor *t, const char *what)
{
    size_t count = t->count, need = count;
    tdm_dtype dt = t->dtype;
    if (dt == TDM_COMPLEX64 || dt == TDM_COMPLEX128)
        need = count * 2; /* cannot overflow: count * 8 bytes fit */
    if (dtype_packed_bits(dt))
        need = packed_bytes(dt, count);
    switch (dt) {
    case TDM_FLOAT:
    case TDM_COMPLEX64:
        if (tp->n_float_data != need)
            return data_mismatch(c, t, what, tp->n_float_data, "values", "float_data", need);
        if (need) {
            t->data = tp->float_data;
            tp->float_data = NULL;
            tp->n_float_data = 0;
        }
        break;
    case TDM_DOUBLE:
    case TDM_COMPLEX128:
        if (tp->n_double_data != need)
            return data_mismatch(c, t, what, tp->n_double_data, "values", "double_data", need);
        if (need) {
            t->data = tp->double_data;
            tp->double_data = NULL;
            tp->n_double_data = 0;
        }
        break;
    case TDM_INT64:
        if (tp->n_int64_data != need)
            return data_mismatch(c, t, what, tp->n_int64_data, "values", "int64_data", need);
        if (need) {
            t->data = tp->int64_data;
            tp->int64_data = NULL;
            tp->n_int64_data = 0;
        }
        break;
    case TDM_UINT64:
    case TDM_UINT32:
        if (tp->n_uint64_data != need)
            return data_mismatch(c, t, what, tp->n_uint64_data, "values", "uint64_data", need);
        if (dt == TDM_UINT64 && need) {
            t->data = tp->uint64_data;
            tp->uint64_data = NULL;
            tp->n_uint64_data = 0;
        } else if (need) {
            uint32_t *d = mem_alloc(count * sizeof *d);
            if (!d)
                return err_set(c->e, TDM_E_NOMEM, "out of memory");
            for (size_t i = 0; i < count; i++)
                d[i] = (uint32_t)tp->uint64_data[i];
            t->data = d;
        }
        break;
    case TDM_INT32:
        if (tp->n_int32_data != need)
            return data_mismatch(c, t, what, tp->n_int32_data, "values", "int32_data", need);
        if (need) {
            t->data = tp->int32_data;
            tp->int32_data = NULL;
            tp->n_int32_data = 0;
        }
        break;
    case TDM_INT8:
    case TDM_UINT8:
    case TDM_BOOL:
    case TDM_FLOAT8E4M3FN:
    case TDM_FLOAT8E4M3FNUZ:
    case TDM_FLOAT8E5M2:
    case TDM_FLOAT8E5M2FNUZ:
    case TDM_FLOAT8E8M0:
    case TDM_UINT4:
    case TDM_INT4:
    case TDM_FLOAT4E2M1:
    case TDM_UINT2:
    case TDM_INT2: {
        if (tp->n_int32_data != need)
            return data_mismatch(c, t, what, tp->n_int32_data, "values", "int32_data", need);
        uint8_t *d = mem_alloc(count);
        if (!d)
            return err_set(c->e, TDM_E_NOMEM, "out of memory");
        if (dtype_packed_bits(dt)) {
            size_t per = (size_t)(8 / dtype_packed_bits(dt));
            for (size_t i = 0; i < count; i++)
                d[i] = unpack_one((uint32_t)tp->int32_data[i / per], i, dt);
        } else {
            for (size_t i = 0; i < count; i++)
                d[i] = dt == TDM_BOOL ? (uint8_t)(tp->int32_data[i] != 0) : (uint8_t)tp->int32_data[i];
        }
        t->data = d;
        break;
    }
    case TDM_INT16:
    case TDM_UINT16:
    case TDM_FLOAT16:
    case TDM_BFLOAT16: {
        if (tp->n_int32_data != need)
            return data_mismatch(c, t, what, tp->n_int32_data, "values", "int32_data", need);
        uint16_t *d = mem_alloc(count * sizeof *d);
        if (!d)
            return err_set(c->e, TDM_E_NOMEM, "out of memory");
        for (size_t i = 0; i < count; i++)
            d[i] = (uint16_t)tp->int32_data[i];
        t->data = d;
        break;
    }
    case TDM_STRING:
    case TDM_UNDEFINED:
        return err_set(c->e, TDM_E_INTERNAL, "%s: %s: unexpected element type", c->fname, what);
    }
    return TDM_OK;
}

static tdm_status strings_from_proto(onnx_ctx *c, Onnx__TensorProto *tp, tdm_tensor *t, const char *what)
{
    if (tp->has_raw_data || tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return err_set(c->e, TDM_E_MODEL, "%s: %s is a string tensor with %s; strings must be in string_data", c->fname,
                       what, tp->has_raw_data ? "raw_data" : "external data");
    if (tp->n_string_data != t->count)
        return data_mismatch(c, t, what, tp->n_string_data, "values", "string_data", t->count);
    char **s = mem_calloc(t->count ? t->count : 1, sizeof *s);
    if (!s)
        return err_set(c->e, TDM_E_NOMEM, "out of memory");
    t->data = s; /* freed with t from here on */
    for (size_t i = 0; i < t->count; i++) {
        const ProtobufCBinaryData *b = &tp->string_data[i];
        if (!(s[i] = b->len ? mem_strndup((const char *)b->data, b->len) : mem_strdup("")))
            return err_set(c->e, TDM_E_NOMEM, "out of memory");
    }
    return TDM_OK;
}

tdm_status onnx_tensor_from_proto(onnx_ctx *c, Onnx__TensorProto *tp, const char *what, tdm_tensor **out)
{
    tdm_err *e = c->e;
    tdm_status st;
    char shp[160];
    *out = NULL;
    if (!tp->has_data_type || tp->data_type == 0)
        return err_set(e, TDM_E_MODEL, "%s: %s has no data_type", c->fname, what);
    if (!dtype_valid(tp->data_type))
        return err_set(e, TDM_E_UNSUPPORTED, "%s: %s has element type %d, which tandem does not know", c->fname, what,
                       (int)tp->data_type);
    if (tp->segment)
        return err_set(e, TDM_E_UNSUPPORTED, "%s: %s is a segment of a tensor, which tandem does not support",
                       c->fname, what);
    if (tp->n_dims > TDM_MAX_RANK)
        return err_set(e, TDM_E_UNSUPPORTED, "%s: %s has rank %zu; tandem handles tensors of rank up to %d", c->fname,
                       what, tp->n_dims, TDM_MAX_RANK);
    int rank = (int)tp->n_dims;
    for (int i = 0; i < rank; i++)
        if (tp->dims[i] < 0)
            return err_set(e, TDM_E_MODEL, "%s: %s has a negative dimension (%lld at axis %d)", c->fname, what,
                           (long long)tp->dims[i], i);
    tdm_dtype dt = (tdm_dtype)tp->data_type;
    size_t esize = tdm_dtype_size(dt), count, need;
    if (shape_count(rank, tp->dims, &count) || mem_mul(count, dt == TDM_STRING ? sizeof(char *) : esize, &need))
        return err_set(e, TDM_E_MODEL, "%s: %s has dims %s, whose element count overflows", c->fname, what,
                       shape_str(rank, tp->dims, shp, sizeof shp));
    tdm_tensor *t = mem_calloc(1, sizeof *t);
    if (!t)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    t->kind = TDM_KIND_TENSOR;
    t->dtype = dt;
    t->rank = rank;
    for (int i = 0; i < rank; i++)
        t->dims[i] = tp->dims[i];
    t->count = count;
    t->nbytes = dt == TDM_STRING ? 0 : need;
    /* bytes in the file: 4-bit and 2-bit types pack several values per byte */
    size_t fbytes = dtype_packed_bits(dt) ? packed_bytes(dt, count) : need;

    if (dt == TDM_STRING) {
        st = strings_from_proto(c, tp, t, what);
    } else if (tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        void *buf;
        file_map *map;
        st = read_external(c, tp, t, what, fbytes, &buf, &map);
        if (st == TDM_OK && map) {
            t->data = buf; /* in place: host order, one value per element */
            t->map = map;
            t->borrowed = 1;
        } else if (st == TDM_OK) {
            if (dtype_packed_bits(dt)) {
                uint8_t *d = mem_alloc(count);
                if (!d) {
                    mem_free(buf);
                    st = err_set(e, TDM_E_NOMEM, "out of memory");
                } else {
                    unpack(buf, count, dt, d);
                    mem_free(buf);
                    t->data = d;
                }
            } else {
                tensor_swap_le(buf, dt, count);
                t->data = buf;
            }
        }
    } else if (tp->has_raw_data && c->raw_at) {
        /* raw_data in the model file's mapping (onnx_can_map held) */
        if (tp->raw_data.len != fbytes) {
            st = err_set(e, TDM_E_MODEL, "%s: %s has %zu bytes of raw_data, its dims %s of %s need %zu", c->fname, what,
                         tp->raw_data.len, shape_str(rank, t->dims, shp, sizeof shp), tdm_dtype_name(dt), fbytes);
        } else {
            t->data = (void *)(uintptr_t)c->raw_at;
            t->map = file_map_ref(c->raw_map);
            t->borrowed = 1;
            st = TDM_OK;
        }
    } else if (tp->has_raw_data) {
        if (tp->raw_data.len != fbytes) {
            st = err_set(e, TDM_E_MODEL, "%s: %s has %zu bytes of raw_data, its dims %s of %s need %zu", c->fname, what,
                         tp->raw_data.len, shape_str(rank, t->dims, shp, sizeof shp), tdm_dtype_name(dt), fbytes);
        } else if (dtype_packed_bits(dt)) {
            uint8_t *d = mem_alloc(count);
            if (!d) {
                st = err_set(e, TDM_E_NOMEM, "out of memory");
            } else {
                unpack(tp->raw_data.data, count, dt, d);
                t->data = d;
                st = TDM_OK;
            }
        } else if (fbytes) {
            /* take protobuf-c's copy (malloc'd by its default allocator) */
            t->data = tp->raw_data.data;
            tp->raw_data.data = NULL;
            tp->raw_data.len = 0;
            tp->has_raw_data = 0;
            tensor_swap_le(t->data, dt, count);
            st = TDM_OK;
        } else {
            st = TDM_OK;
        }
    } else {
        st = from_typed(c, tp, t, what);
    }
    if (st == TDM_OK && !t->data && !(t->data = mem_alloc(0)))
        st = err_set(e, TDM_E_NOMEM, "out of memory");
    if (st != TDM_OK) {
        tdm_tensor_destroy(t);
        return st;
    }
    *out = t;
    return TDM_OK;
}

/* ---- SparseTensorProto ---- */

tdm_status onnx_sparse_from_proto(onnx_ctx *c, Onnx__SparseTensorProto *sp, const char *what, tdm_tensor **out)
{
    tdm_err *e = c->e;
    tdm_status st;
    char w2[200], shp[160];
    tdm_tensor *vals = NULL, *idx = NULL, *t = NULL;
    *out = NULL;
    if (!sp->values || !sp->indices)
        return err_set(e, TDM_E_MODEL, "%s: sparse %s has no %s", c->fname, what, sp->values ? "indices" : "values");
    if (sp->n_dims > TDM_MAX_RANK)
        return err_set(e, TDM_E_UNSUPPORTED, "%s: sparse %s has rank %zu; tandem handles tensors of rank up to %d",
                       c->fname, what, sp->n_dims, TDM_MAX_RANK);
    int rank = (int)sp->n_dims;
    size_t count;
    for (int i = 0; i < rank; i++)
        if (sp->dims[i] < 0)
            return err_set(e, TDM_E_MODEL, "%s: sparse %s has a negative dimension (%lld at axis %d)", c->fname, what,
                           (long long)sp->dims[i], i);
    if (shape_count(rank, sp->dims, &count) || count > (size_t)INT64_MAX)
        return err_set(e, TDM_E_MODEL, "%s: sparse %s has dims %s, whose element count overflows", c->fname, what,
                       shape_str(rank, sp->dims, shp, sizeof shp));
    snprintf(w2, sizeof w2, "%s (values)", what);
    if ((st = onnx_tensor_from_proto(c, sp->values, w2, &vals)) != TDM_OK)
        return st;
    snprintf(w2, sizeof w2, "%s (indices)", what);
    if ((st = onnx_tensor_from_proto(c, sp->indices, w2, &idx)) != TDM_OK)
        goto done;
    size_t nnz = vals->rank == 1 ? (size_t)vals->dims[0] : 0;
    if (vals->rank != 1) {
        st = err_set(e, TDM_E_MODEL, "%s: sparse %s has values of rank %d; they must be a list", c->fname, what,
                     vals->rank);
        goto done;
    }
    if (idx->dtype != TDM_INT64 ||
        !((idx->rank == 1 && (size_t)idx->dims[0] == nnz) ||
          (idx->rank == 2 && (size_t)idx->dims[0] == nnz && idx->dims[1] == rank))) {
        st = err_set(e, TDM_E_MODEL, "%s: sparse %s has indices of type %s and shape %s; %zu values need int64 [%zu] or [%zu,%d]",
                     c->fname, what, tdm_dtype_name(idx->dtype), shape_str(idx->rank, idx->dims, shp, sizeof shp), nnz,
                     nnz, nnz, rank);
        goto done;
    }
    size_t esize = vals->dtype == TDM_STRING ? sizeof(char *) : tdm_dtype_size(vals->dtype), bytes;
    if (mem_mul(count, esize, &bytes) || bytes > ONNX_MAX_SPARSE_DENSE_BYTES) {
        st = err_set(e, TDM_E_UNSUPPORTED, "%s: sparse %s has dims %s, over 1 GiB once dense", c->fname, what,
                     shape_str(rank, sp->dims, shp, sizeof shp));
        goto done;
    }
    if ((st = tensor_new(e, vals->dtype, rank, sp->dims, &t)) != TDM_OK)
        goto done;
    if (vals->dtype != TDM_STRING && t->nbytes)
        memset(t->data, 0, t->nbytes);
    const int64_t *ix = idx->data;
    int64_t strides[TDM_MAX_RANK];
    shape_strides(rank, sp->dims, strides);
    for (size_t k = 0; k < nnz; k++) {
        int64_t lin = 0;
        int bad = 0;
        if (idx->rank == 1) {
            lin = ix[k];
            bad = lin < 0 || (uint64_t)lin >= count;
        } else {
            for (int a = 0; a < rank; a++) {
                int64_t v = ix[k * (size_t)rank + (size_t)a];
                if (v < 0 || v >= sp->dims[a]) {
                    bad = 1;
                    break;
                }
                lin += v * strides[a];
            }
        }
        if (bad) {
            st = err_set(e, TDM_E_MODEL, "%s: sparse %s has index #%zu outside its dims %s", c->fname, what, k,
                         shape_str(rank, sp->dims, shp, sizeof shp));
            goto done;
        }
        if (vals->dtype == TDM_STRING) {
            char **d = t->data;
            char *s = mem_strdup(tensor_str(vals, k));
            if (!s) {
                st = err_set(e, TDM_E_NOMEM, "out of memory");
                goto done;
            }
            mem_free(d[lin]);
            d[lin] = s;
        } else {
            memcpy((uint8_t *)t->data + (size_t)lin * esize, (const uint8_t *)vals->data + k * esize, esize);
        }
    }
    *out = t;
    t = NULL;
done:
    tdm_tensor_destroy(vals);
    tdm_tensor_destroy(idx);
    tdm_tensor_destroy(t);
    return st;
}
