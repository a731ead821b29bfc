#include "core/tensor.h"
#include "core/arena.h"
#include "core/file.h"
#include "core/mem.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtype_table[TDM_DTYPE_COUNT] = {
    [TDM_UNDEFINED] = {"undefined", 0}, [TDM_FLOAT] = {"float", 4},
    [TDM_UINT8] = {"uint8", 1},         [TDM_INT8] = {"int8", 1},
    [TDM_UINT16] = {"uint16", 2},       [TDM_INT16] = {"int16", 2},
    [TDM_INT32] = {"int32", 4},         [TDM_INT64] = {"int64", 8},
    [TDM_STRING] = {"string", 0},       [TDM_BOOL] = {"bool", 1},
    [TDM_FLOAT16] = {"float16", 2},     [TDM_DOUBLE] = {"double", 8},
    [TDM_UINT32] = {"uint32", 4},       [TDM_UINT64] = {"uint64", 8},
    [TDM_COMPLEX64] = {"complex64", 8}, [TDM_COMPLEX128] = {"complex128", 16},
    [TDM_BFLOAT16] = {"bfloat16", 2},   [TDM_FLOAT8E4M3FN] = {"float8e4m3fn", 1},
    [TDM_FLOAT8E4M3FNUZ] = {"float8e4m3fnuz", 1}, [TDM_FLOAT8E5M2] = {"float8e5m2", 1},
    [TDM_FLOAT8E5M2FNUZ] = {"float8e5m2fnuz", 1}, [TDM_UINT4] = {"uint4", 1},
    [TDM_INT4] = {"int4", 1},           [TDM_FLOAT4E2M1] = {"float4e2m1", 1},
    [TDM_FLOAT8E8M0] = {"float8e8m0", 1}, [TDM_UINT2] = {"uint2", 1},
    [TDM_INT2] = {"int2", 1},
};

const char *tdm_dtype_name(tdm_dtype dt)
{
    if ((int)dt < 0 || (int)dt >= TDM_DTYPE_COUNT)
        return "undefined";
    return dtype_table[dt].name;
}

size_t tdm_dtype_size(tdm_dtype dt)
{
    if ((int)dt < 0 || (int)dt >= TDM_DTYPE_COUNT)
        return 0;
    return dtype_table[dt].size;
}

int dtype_valid(int dt) { return dt > 0 && dt < TDM_DTYPE_COUNT; }

int dtype_packed_bits(tdm_dtype dt)
{
    if (dt == TDM_INT4 || dt == TDM_UINT4 || dt == TDM_FLOAT4E2M1)
        return 4;
    return dt == TDM_INT2 || dt == TDM_UINT2 ? 2 : 0;
}

int dtype_is_float(tdm_dtype dt)
{
    return dt == TDM_FLOAT || dt == TDM_DOUBLE || dt == TDM_FLOAT16 || dt == TDM_BFLOAT16;
}

int dtype_is_signed(tdm_dtype dt)
{
    return dt == TDM_INT8 || dt == TDM_INT16 || dt == TDM_INT32 || dt == TDM_INT64;
}

int dtype_is_int(tdm_dtype dt)
{
    return dtype_is_signed(dt) || dt == TDM_UINT8 || dt == TDM_UINT16 || dt == TDM_UINT32 ||
           dt == TDM_UINT64;
}

int shape_count(int rank, const int64_t *dims, size_t *out)
{
    size_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0 || (uint64_t)dims[i] > SIZE_MAX)
            return -1;
        if (mem_mul(n, (size_t)dims[i], &n))
            return -1;
    }
    *out = n;
    return 0;
}

void shape_strides(int rank, const int64_t *dims, int64_t *strides)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i];
    }
}

int shape_equal(int ra, const int64_t *a, int rb, const int64_t *b)
{
    if (ra != rb)
        return 0;
    for (int i = 0; i < ra; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

const char *shape_str(int rank, const int64_t *dims, char *buf, size_t size)
{
    if (size == 0)
        return buf;
    if (rank == 0) {
        snprintf(buf, size, "scalar");
        return buf;
    }
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < rank && off < size; i++) {
        int n = snprintf(buf + off, size - off, i ? "x%lld" : "%lld", (long long)dims[i]);
        if (n < 0)
            break;
        off += (size_t)n;
    }
    return buf;
}

tensor_aux *tensor_aux_find(const tdm_tensor *t, uint64_t key)
{
    tensor_aux *a = atomic_load_explicit(&((tdm_tensor *)t)->aux, memory_order_acquire);
    for (; a; a = a->next)
        if (a->key == key)
            return a;
    return NULL;
}

tensor_aux *tensor_aux_attach(const tdm_tensor *t, tensor_aux *a)
{
    tdm_tensor *m = (tdm_tensor *)t; /* the cache is not part of the value */
    tensor_aux *head = atomic_load_explicit(&m->aux, memory_order_acquire);
    for (;;) {
        for (tensor_aux *o = head; o; o = o->next)
            if (o->key == a->key) {
                a->free_fn(a);
                return o;
            }
        a->next = head;
        if (atomic_compare_exchange_weak_explicit(&m->aux, &head, a, memory_order_acq_rel, memory_order_acquire))
            return a;
    }
}

void tensor_reset(tdm_tensor *t)
{
    if (!t)
        return;
    for (tensor_aux *a = atomic_load_explicit(&t->aux, memory_order_acquire), *next; a; a = next) {
        next = a->next;
        a->free_fn(a);
    }
    if (t->dtype == TDM_STRING && t->data && !t->borrowed) {
        char **s = t->data;
        for (size_t i = 0; i < t->count; i++)
            mem_free(s[i]);
    }
    if (!t->borrowed && t->dtype != TDM_STRING)
        arena_give(t->data, t->nbytes); /* kept by the run's arena, if any (core/arena.h) */
    else if (!t->borrowed)
        mem_free(t->data);
    for (size_t i = 0; i < t->n_items; i++)
        tdm_tensor_destroy(t->items[i]);
    mem_free(t->items);
    mem_free(t->aligned);
    file_map_unref(t->map);
    memset(t, 0, sizeof *t);
    t->kind = TDM_KIND_TENSOR;
}

tdm_status tensor_alloc(tdm_err *e, tdm_tensor *t, tdm_dtype dtype, int rank, const int64_t *dims)
{
    char buf[256];
    if (rank < 0 || rank > TDM_MAX_RANK)
        return err_set(e, TDM_E_UNSUPPORTED, "rank %d is outside 0..%d", rank, TDM_MAX_RANK);
    if (!dtype_valid(dtype))
        return err_set(e, TDM_E_UNSUPPORTED, "element type %d is not a tensor type", (int)dtype);
    size_t count, nbytes = 0;
    if (shape_count(rank, dims, &count))
        return err_set(e, TDM_E_NOMEM, "shape %s has a negative dimension or too many elements",
                       shape_str(rank, dims, buf, sizeof buf));
    size_t esize = dtype == TDM_STRING ? sizeof(char *) : tdm_dtype_size(dtype);
    if (mem_mul(count, esize, &nbytes))
        return err_set(e, TDM_E_NOMEM, "shape %s is too large", shape_str(rank, dims, buf, sizeof buf));
    if (t->borrowed == TENSOR_PRESET) {
        /* a buffer the executor placed (run/exec.c: a slab of a Concat's
         * output): kept for the request it was made for, else dropped */
        int same = t->kind == TDM_KIND_TENSOR && t->dtype == dtype && dtype != TDM_STRING && t->rank == rank &&
                   t->nbytes == nbytes && t->data;
        for (int i = 0; same && i < rank; i++)
            same = t->dims[i] == dims[i];
        t->borrowed = 1;
        if (same) {
            t->held = TDM_UNDEFINED;
            return TDM_OK;
        }
    }
    void *data = dtype == TDM_STRING ? mem_calloc(count ? count : 1, sizeof(char *)) : arena_take(nbytes);
    if (!data)
        return err_set(e, TDM_E_NOMEM, "out of memory allocating %zu bytes for a %s tensor of shape %s",
                       nbytes, tdm_dtype_name(dtype), shape_str(rank, dims, buf, sizeof buf));
    tensor_reset(t);
    t->kind = TDM_KIND_TENSOR;
    t->dtype = dtype;
    t->rank = rank;
    for (int i = 0; i < rank; i++)
        t->dims[i] = dims[i];
    t->count = count;
    t->nbytes = dtype == TDM_STRING ? 0 : nbytes;
    t->data = data;
    return TDM_OK;
}

tdm_status tensor_new(tdm_err *e, tdm_dtype dtype, int rank, const int64_t *dims, tdm_tensor **out)
{
    *out = NULL;
    tdm_tensor *t = mem_calloc(1, sizeof *t);
    if (!t)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    tdm_status st = tensor_alloc(e, t, dtype, rank, dims);
    if (st) {
        mem_free(t);
        return st;
    }
    *out = t;
    return TDM_OK;
}

tdm_status tensor_view(tdm_err *e, const tdm_tensor *src, tdm_tensor **out)
{
    *out = NULL;
    if (src->kind != TDM_KIND_TENSOR)
        return tensor_clone(e, src, out);
    tdm_tensor *t = mem_calloc(1, sizeof *t);
    if (!t)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    *t = *src;
    t->items = NULL;
    t->n_items = t->cap_items = 0;
    atomic_init(&t->aux, NULL); /* the cache stays with the owner */
    t->borrowed = 1;
    if (__atomic_load_n(&src->aligned, __ATOMIC_ACQUIRE)) {
        /* the owner's aligned copy is the owner's: the view reads the
         * mapping (its reference keeps it), and aligns on its own */
        t->data = (void *)(uintptr_t)src->in_map;
    }
    t->aligned = NULL;
    t->map = file_map_ref(src->map); /* its own reference: a view may drop the pages too */
    *out = t;
    return TDM_OK;
}

tdm_status tensor_clone(tdm_err *e, const tdm_tensor *src, tdm_tensor **out)
{
    tdm_status st;
    *out = NULL;
    tdm_tensor *t = mem_calloc(1, sizeof *t);
    if (!t)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    t->kind = src->kind;
    t->dtype = src->dtype;
    if (src->kind == TDM_KIND_SEQUENCE || src->kind == TDM_KIND_MAP) {
        for (size_t i = 0; i < src->n_items; i++) {
            tdm_tensor *it;
            if ((st = tensor_clone(e, src->items[i], &it)) != TDM_OK)
                goto fail;
            if (mem_grow((void **)&t->items, &t->cap_items, t->n_items + 1, sizeof *t->items)) {
                tdm_tensor_destroy(it);
                st = err_set(e, TDM_E_NOMEM, "out of memory");
                goto fail;
            }
            t->items[t->n_items++] = it;
        }
    } else if (src->kind == TDM_KIND_TENSOR) {
        if ((st = tensor_alloc(e, t, src->dtype, src->rank, src->dims)) != TDM_OK)
            goto fail;
        if (src->dtype == TDM_STRING) {
            char **d = t->data;
            for (size_t i = 0; i < src->count; i++) {
                const char *s = tensor_str(src, i);
                if (!(d[i] = mem_strdup(s))) {
                    st = err_set(e, TDM_E_NOMEM, "out of memory");
                    goto fail;
                }
            }
        } else if (src->nbytes) {
            memcpy(t->data, src->data, src->nbytes);
        }
    }
    *out = t;
    return TDM_OK;
fail:
    tdm_tensor_destroy(t);
    return st;
}

tdm_status tensor_share(tdm_err *e, const tdm_tensor *src, tdm_tensor **out)
{
    tdm_status st;
    *out = NULL;
    /* two sessions may specialise one model at once: src's map and borrowed
     * are read and handed over atomically (the first share wins) */
    if (!__atomic_load_n(&src->map, __ATOMIC_ACQUIRE) && src->kind == TDM_KIND_TENSOR &&
        src->dtype != TDM_STRING && !__atomic_load_n(&src->borrowed, __ATOMIC_ACQUIRE) && src->data &&
        src->nbytes) {
        /* its own heap data: handed to a shared block (file_map.heap) that
         * src and every share of it reference, so that a specialised model
         * does not copy the weights (ppocr_det: 4.5 MiB a clone) */
        file_map *m = file_map_heap(src->data, src->nbytes), *none = NULL;
        if (!m)
            return err_set(e, TDM_E_NOMEM, "out of memory");
        tdm_tensor *w = (tdm_tensor *)(uintptr_t)src;
        if (__atomic_compare_exchange_n(&w->map, &none, m, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            __atomic_store_n(&w->borrowed, 1, __ATOMIC_RELEASE);
        else
            mem_free(m); /* another share made it first */
    }
    if (!__atomic_load_n(&src->map, __ATOMIC_ACQUIRE)) {
        if ((st = tensor_clone(e, src, out)) == TDM_OK)
            (*out)->immutable = src->immutable;
        return st;
    }
    if ((st = tensor_view(e, src, out)) == TDM_OK)
        (*out)->immutable = src->immutable;
    return st;
}

void tensor_drop_pages(const tdm_tensor *t)
{
    if (t)
        tensor_drop_span(t, t->data, t->nbytes);
}

int tensor_in_file(const tdm_tensor *t)
{
    if (!t || !t->map || t->map->heap)
        return 0;
    uintptr_t p = (uintptr_t)t->data, lo = (uintptr_t)t->map->base;
    return p >= lo && p - lo <= t->map->size; /* not once tensor_align moved it to the heap */
}

/* The alignment a load of one element of dt needs. */
static size_t elem_align(tdm_dtype dt)
{
    size_t a = tdm_dtype_size(dt);
    if (dt == TDM_COMPLEX64 || dt == TDM_COMPLEX128)
        a /= 2; /* two floats (doubles) */
    return a ? a : 1;
}

int tensor_misaligned(const tdm_tensor *t)
{
    return t && t->kind == TDM_KIND_TENSOR && t->dtype != TDM_STRING && t->data &&
           (uintptr_t)t->data % elem_align(t->dtype) != 0;
}

const void *tensor_align(const tdm_tensor *t)
{
    if (!t)
        return NULL;
    const void *orig = __atomic_load_n(&t->data, __ATOMIC_ACQUIRE);
    if (!orig || t->kind != TDM_KIND_TENSOR || t->dtype == TDM_STRING || (uintptr_t)orig % elem_align(t->dtype) == 0)
        return orig; /* aligned: its own, or the copy another thread made */
    tdm_tensor *w = (tdm_tensor *)(uintptr_t)t;
    void *have = __atomic_load_n(&w->aligned, __ATOMIC_ACQUIRE);
    if (!have) {
        void *copy = mem_alloc(t->nbytes ? t->nbytes : 1);
        if (!copy)
            return NULL;
        memcpy(copy, orig, t->nbytes);
        /* every thread stores the same address: where the bytes lie */
        __atomic_store_n(&w->in_map, orig, __ATOMIC_RELAXED);
        if (__atomic_compare_exchange_n(&w->aligned, &have, copy, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            have = copy;
            /* the bytes are resident once, in the copy: the mapping's pages
             * go (a reader of the old pointer pages them in again) */
            if (tensor_in_file(t))
                file_drop_pages(orig, t->nbytes, 1);
        } else {
            mem_free(copy); /* another thread made it first */
        }
    }
    __atomic_store_n(&w->data, have, __ATOMIC_RELEASE);
    return have;
}

const void *tensor_read_aligned(const tdm_tensor *t, void **tmp)
{
    *tmp = NULL;
    if (!tensor_misaligned(t))
        return t ? t->data : NULL;
    if (!(*tmp = mem_alloc(t->nbytes ? t->nbytes : 1)))
        return NULL;
    memcpy(*tmp, t->data, t->nbytes);
    return *tmp;
}

void tensor_drop_span(const tdm_tensor *t, const void *p, size_t len)
{
    if (!tensor_in_file(t) || t->kind != TDM_KIND_TENSOR || !t->data || !p)
        return; /* only a file's pages can be read in again */
    uintptr_t lo = (uintptr_t)t->data, a = (uintptr_t)p;
    if (a < lo || a - lo > t->nbytes || len > t->nbytes - (a - lo))
        return; /* not inside t's data: never drop anything else */
    file_drop_pages(p, len, 1);
}

const char *tensor_str(const tdm_tensor *t, size_t i)
{
    const char *const *s = t->data;
    return s && s[i] ? s[i] : "";
}

/* Element i of p as type T, read as bytes: a model's constant may lie
 * misaligned in its file (core/tensor.h tensor_misaligned), and the
 * accessors below serve its readers too (scales, biases, shapes). */
#define TENSOR_LOADER(name, T)                                                                                   \
    static T name(const void *p, size_t i)                                                                       \
    {                                                                                                             \
        T v;                                                                                                      \
        memcpy(&v, (const char *)p + i * sizeof v, sizeof v);                                                     \
        return v;                                                                                                 \
    }
TENSOR_LOADER(ld_f32, float)
TENSOR_LOADER(ld_f64, double)
TENSOR_LOADER(ld_i16, int16_t)
TENSOR_LOADER(ld_u16, uint16_t)
TENSOR_LOADER(ld_i32, int32_t)
TENSOR_LOADER(ld_u32, uint32_t)
TENSOR_LOADER(ld_i64, int64_t)
TENSOR_LOADER(ld_u64, uint64_t)
#undef TENSOR_LOADER

double tensor_get_f64(const tdm_tensor *t, size_t i)
{
    const void *p = t->data;
    switch (t->dtype) {
    case TDM_FLOAT: return ld_f32(p, i);
    case TDM_DOUBLE: return ld_f64(p, i);
    case TDM_FLOAT16: return fp16_to_f32(ld_u16(p, i));
    case TDM_BFLOAT16: return bf16_to_f32(ld_u16(p, i));
    case TDM_INT8: return ((const int8_t *)p)[i];
    case TDM_INT16: return ld_i16(p, i);
    case TDM_INT32: return ld_i32(p, i);
    case TDM_INT64: return (double)ld_i64(p, i);
    case TDM_UINT8: case TDM_BOOL: return ((const uint8_t *)p)[i];
    case TDM_UINT16: return ld_u16(p, i);
    case TDM_UINT32: return ld_u32(p, i);
    case TDM_UINT64: return (double)ld_u64(p, i);
    default: return 0.0;
    }
}

int64_t tensor_get_i64(const tdm_tensor *t, size_t i)
{
    const void *p = t->data;
    switch (t->dtype) {
    case TDM_INT8: return ((const int8_t *)p)[i];
    case TDM_INT16: return ld_i16(p, i);
    case TDM_INT32: return ld_i32(p, i);
    case TDM_INT64: return ld_i64(p, i);
    case TDM_UINT8: case TDM_BOOL: return ((const uint8_t *)p)[i];
    case TDM_UINT16: return ld_u16(p, i);
    case TDM_UINT32: return ld_u32(p, i);
    case TDM_UINT64: return (int64_t)ld_u64(p, i);
    default: {
        double d = tensor_get_f64(t, i);
        if (d != d)
            return 0;
        if (d >= 9.2233720368547758e18)
            return INT64_MAX;
        if (d <= -9.2233720368547758e18)
            return INT64_MIN;
        return (int64_t)d;
    }
    }
}

void tensor_set_f64(tdm_tensor *t, size_t i, double v)
{
    void *p = t->data;
    switch (t->dtype) {
    case TDM_FLOAT: ((float *)p)[i] = (float)v; break;
    case TDM_DOUBLE: ((double *)p)[i] = v; break;
    case TDM_FLOAT16: ((uint16_t *)p)[i] = f32_to_fp16((float)v); break;
    case TDM_BFLOAT16: ((uint16_t *)p)[i] = f32_to_bf16((float)v); break;
    case TDM_BOOL: ((uint8_t *)p)[i] = v != 0.0; break;
    default: tensor_set_i64(t, i, (int64_t)v); break;
    }
}

void tensor_set_i64(tdm_tensor *t, size_t i, int64_t v)
{
    void *p = t->data;
    switch (t->dtype) {
    case TDM_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
    case TDM_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
    case TDM_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    case TDM_INT64: ((int64_t *)p)[i] = v; break;
    case TDM_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case TDM_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case TDM_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case TDM_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case TDM_UINT64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    default: tensor_set_f64(t, i, (double)v); break;
    }
}

/* ---- half precision ---- */

int host_is_le(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

void tensor_swap_le(void *data, tdm_dtype dt, size_t count)
{
    size_t w = tdm_dtype_size(dt);
    if (dt == TDM_COMPLEX64 || dt == TDM_COMPLEX128) {
        w /= 2;
        count *= 2;
    }
    if (host_is_le() || w < 2)
        return;
    unsigned char *p = data;
    for (size_t i = 0; i < count; i++, p += w)
        for (size_t a = 0, b = w - 1; a < b; a++, b--) {
            unsigned char c = p[a];
            p[a] = p[b];
            p[b] = c;
        }
}

float fp16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            man &= 0x3ff;
            bits = sign | (exp << 23) | (man << 13);
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t f32_to_fp16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t exp = (x >> 23) & 0xff;
    uint32_t man = x & 0x7fffff;
    if (exp == 0xff) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 | (man >> 13) : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 0x1f)
        return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000;
        int shift = 14 - e;
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
        half++; /* may carry into the exponent, which is right (up to inf) */
    return (uint16_t)half;
}

float bf16_to_f32(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x40);
    uint32_t lsb = (x >> 16) & 1;
    x += 0x7fff + lsb;
    return (uint16_t)(x >> 16);
}

/* ---- public tensor API ---- */

tdm_status tdm_tensor_create(tdm_dtype dtype, int rank, const int64_t *dims, tdm_tensor **out)
{
    if (!out)
        return TDM_E_USAGE;
    *out = NULL;
    if (rank > 0 && !dims)
        return TDM_E_USAGE;
    tdm_tensor *t;
    tdm_status st = tensor_new(NULL, dtype, rank, dims, &t);
    if (st)
        return st;
    if (dtype != TDM_STRING && t->nbytes)
        memset(t->data, 0, t->nbytes);
    *out = t;
    return TDM_OK;
}

tdm_status tdm_sequence_create(tdm_dtype elem_dtype, tdm_tensor **out)
{
    if (!out)
        return TDM_E_USAGE;
    *out = NULL;
    tdm_tensor *t = mem_calloc(1, sizeof *t);
    if (!t)
        return TDM_E_NOMEM;
    t->kind = TDM_KIND_SEQUENCE;
    t->dtype = elem_dtype;
    *out = t;
    return TDM_OK;
}

tdm_status tensor_map_new(tdm_err *e, tdm_tensor *keys, tdm_tensor *values, tdm_tensor **out)
{
    *out = NULL;
    if (!keys || !values || keys->kind != TDM_KIND_TENSOR || values->kind != TDM_KIND_TENSOR || keys->rank != 1 ||
        values->rank != 1 || keys->dims[0] != values->dims[0] ||
        (keys->dtype != TDM_INT64 && keys->dtype != TDM_STRING)) {
        tdm_tensor_destroy(keys);
        tdm_tensor_destroy(values);
        return err_set(e, TDM_E_USAGE, "a map needs 1-D int64 or string keys and 1-D values of the same length");
    }
    tdm_tensor *t = mem_calloc(1, sizeof *t);
    tdm_tensor **items = mem_calloc(2, sizeof *items);
    if (!t || !items) {
        mem_free(t);
        mem_free(items);
        tdm_tensor_destroy(keys);
        tdm_tensor_destroy(values);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    t->kind = TDM_KIND_MAP;
    t->dtype = values->dtype;
    items[0] = keys;
    items[1] = values;
    t->items = items;
    t->n_items = t->cap_items = 2;
    *out = t;
    return TDM_OK;
}

tdm_status tdm_map_create(tdm_tensor *keys, tdm_tensor *values, tdm_tensor **out)
{
    if (!out) {
        tdm_tensor_destroy(keys);
        tdm_tensor_destroy(values);
        return TDM_E_USAGE;
    }
    return tensor_map_new(NULL, keys, values, out);
}

const tdm_tensor *tdm_map_keys(const tdm_tensor *map)
{
    return map && map->kind == TDM_KIND_MAP && map->n_items == 2 ? map->items[0] : NULL;
}

const tdm_tensor *tdm_map_values(const tdm_tensor *map)
{
    return map && map->kind == TDM_KIND_MAP && map->n_items == 2 ? map->items[1] : NULL;
}

tdm_status tdm_none_create(tdm_tensor **out)
{
    if (!out)
        return TDM_E_USAGE;
    *out = NULL;
    tdm_tensor *t = mem_calloc(1, sizeof *t);
    if (!t)
        return TDM_E_NOMEM;
    t->kind = TDM_KIND_NONE;
    *out = t;
    return TDM_OK;
}

tdm_status tdm_sequence_append(tdm_tensor *seq, tdm_tensor *item)
{
    if (!seq || !item || seq->kind != TDM_KIND_SEQUENCE) {
        tdm_tensor_destroy(item);
        return TDM_E_USAGE;
    }
    if (mem_grow((void **)&seq->items, &seq->cap_items, seq->n_items + 1, sizeof *seq->items)) {
        tdm_tensor_destroy(item);
        return TDM_E_NOMEM;
    }
    seq->items[seq->n_items++] = item;
    return TDM_OK;
}

tdm_status tdm_tensor_clone(const tdm_tensor *t, tdm_tensor **out)
{
    if (!t || !out)
        return TDM_E_USAGE;
    return tensor_clone(NULL, t, out);
}

void tdm_tensor_destroy(tdm_tensor *t)
{
    if (!t)
        return;
    tensor_reset(t);
    mem_free(t);
}

tdm_kind tdm_tensor_kind(const tdm_tensor *t) { return t->kind; }
tdm_dtype tdm_tensor_dtype(const tdm_tensor *t) { return t->dtype; }
int tdm_tensor_rank(const tdm_tensor *t) { return t->rank; }
const int64_t *tdm_tensor_dims(const tdm_tensor *t) { return t->dims; }
size_t tdm_tensor_count(const tdm_tensor *t) { return t->kind == TDM_KIND_TENSOR ? t->count : 0; }
size_t tdm_tensor_nbytes(const tdm_tensor *t) { return t->kind == TDM_KIND_TENSOR ? t->nbytes : 0; }
/* a model's constant misaligned in its file is aligned for the caller, who
 * loads elements from it (core/tensor.h tensor_align) */
void *tdm_tensor_data(tdm_tensor *t) { return (void *)(uintptr_t)tensor_align(t); }
const void *tdm_tensor_cdata(const tdm_tensor *t) { return tensor_align(t); }
size_t tdm_sequence_length(const tdm_tensor *seq) { return seq->kind == TDM_KIND_SEQUENCE ? seq->n_items : 0; }

const tdm_tensor *tdm_sequence_item(const tdm_tensor *seq, size_t i)
{
    if (seq->kind != TDM_KIND_SEQUENCE || i >= seq->n_items)
        return NULL;
    return seq->items[i];
}

tdm_status tdm_tensor_set_string(tdm_tensor *t, size_t i, const char *s, size_t len)
{
    if (!t || t->kind != TDM_KIND_TENSOR || t->dtype != TDM_STRING || i >= t->count || (!s && len))
        return TDM_E_USAGE;
    char *d = mem_strndup(s ? s : "", len);
    if (!d)
        return TDM_E_NOMEM;
    char **arr = t->data;
    mem_free(arr[i]);
    arr[i] = d;
    return TDM_OK;
}
