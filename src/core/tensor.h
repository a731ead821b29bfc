/* The in-memory value: a tensor, a sequence (of tensors or of maps), a map
 * (ZipMap's rows) or an absent optional. This is the definition behind the
 * public opaque tdm_tensor. */
#ifndef TDM_CORE_TENSOR_H
#define TDM_CORE_TENSOR_H

#include "tandem/tandem.h"
#include "core/err.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The largest rank tandem handles; models with more are refused at load
 * with a sentence (ONNX itself sets no limit, no real model comes close). */
#define TDM_MAX_RANK 16

struct tdm_tensor {
    tdm_kind kind;
    tdm_dtype dtype;            /* element type; for a sequence, of its items */
    int rank;
    int64_t dims[TDM_MAX_RANK];
    size_t count;               /* elements: product of dims */
    size_t nbytes;              /* bytes of data (count * size); 0 for strings */
    void *data;                 /* elements, C order; char *[count] for strings */
    int borrowed;               /* data is not owned (e.g. a view of an initializer);
                                 * TENSOR_PRESET: a buffer the executor supplies */
    int immutable;              /* data never changes while the tensor lives, as an
                                 * initializer's: kernels may cache derived forms (tensor_aux) */
    struct file_map *map;       /* data lies in this read-only file mapping (core/file.h;
                                 * borrowed is set): one reference, dropped with the tensor */
    void *aligned;              /* data lay in map at an address not aligned for dtype (ONNX
                                 * raw_data inside a protobuf): the aligned heap copy that
                                 * tensor_align made and data now points to (owned), else NULL */
    const void *in_map;         /* with aligned: where the bytes lie in map */
    tdm_dtype held;             /* TDM_FLOAT16 / TDM_BFLOAT16: every element of this float32
                                 * data is exactly representable in that type (the virtual NPU
                                 * marks the outputs it rounded, so that a node there does not
                                 * round them again); TDM_UNDEFINED: not known. Valid while the
                                 * data does not change; tensor_alloc clears it. */
    /* sequence: its items; map (TDM_KIND_MAP): items[0] the keys, items[1]
     * the values (n_items 2, dtype the values') */
    struct tdm_tensor **items;
    size_t n_items, cap_items;
    /* Derived forms of the data kernels cached (packed weights): a list,
     * freed with the tensor. See tensor_aux_find. */
    _Atomic(struct tensor_aux *) aux;
};

/* tdm_tensor.borrowed of an output shell the executor gave a buffer in
 * advance (a slab of a Concat's output, run/exec.c): the next
 * tensor_alloc of exactly its dtype and shape keeps that buffer (the
 * tensor is then a plain borrowed one, borrowed = 1); another request
 * drops it (not freed) and allocates as usual. */
#define TENSOR_PRESET 2

/* A derived form of a tensor's data that a kernel computes once and keeps
 * on the tensor (e.g. a weight matrix packed for the GEMM). Only ever
 * attached to tensors whose data does not change while they live: graph
 * initializers. key names the form (kernel and layout); free_fn releases
 * the whole object (its first member is this header). */
typedef struct tensor_aux {
    struct tensor_aux *next;
    uint64_t key;
    void (*free_fn)(struct tensor_aux *a);
} tensor_aux;

/* The form with this key on t, or NULL. Safe from several threads. */
tensor_aux *tensor_aux_find(const tdm_tensor *t, uint64_t key);
/* Attaches a (complete) form to t and returns it; when another thread
 * attached one with the same key first, a is freed and that one is
 * returned. Safe from several threads. */
tensor_aux *tensor_aux_attach(const tdm_tensor *t, tensor_aux *a);

/* Bit for an element type in a dtype mask. */
#define DT_BIT(dt) (1u << (dt))
#define DT_FLOATS (DT_BIT(TDM_FLOAT) | DT_BIT(TDM_DOUBLE) | DT_BIT(TDM_FLOAT16) | DT_BIT(TDM_BFLOAT16))
#define DT_SINTS (DT_BIT(TDM_INT8) | DT_BIT(TDM_INT16) | DT_BIT(TDM_INT32) | DT_BIT(TDM_INT64))
#define DT_UINTS (DT_BIT(TDM_UINT8) | DT_BIT(TDM_UINT16) | DT_BIT(TDM_UINT32) | DT_BIT(TDM_UINT64))
#define DT_INTS (DT_SINTS | DT_UINTS)
#define DT_NUMERIC (DT_FLOATS | DT_INTS)
#define DT_ALL (DT_NUMERIC | DT_BIT(TDM_BOOL) | DT_BIT(TDM_STRING))
/* float8 and 4-bit integers: the ops that take them say so (Cast, CastLike,
 * QuantizeLinear, DequantizeLinear and the data movers) */
#define DT_F8_I4 (DT_BIT(TDM_FLOAT8E4M3FN) | DT_BIT(TDM_FLOAT8E4M3FNUZ) | DT_BIT(TDM_FLOAT8E5M2) | \
                  DT_BIT(TDM_FLOAT8E5M2FNUZ) | DT_BIT(TDM_INT4) | DT_BIT(TDM_UINT4) | DT_BIT(TDM_FLOAT4E2M1) | \
                  DT_BIT(TDM_FLOAT8E8M0) | DT_BIT(TDM_INT2) | DT_BIT(TDM_UINT2))

int dtype_is_float(tdm_dtype dt);     /* float, double, float16, bfloat16 */
int dtype_is_int(tdm_dtype dt);       /* signed or unsigned integer */
int dtype_is_signed(tdm_dtype dt);
int dtype_valid(int dt);              /* a value of tdm_dtype other than UNDEFINED */
/* Bits per value of the types ONNX packs several to a byte (4 for int4,
 * uint4 and float4e2m1, 2 for int2 and uint2; low bits first); 0 for the
 * others. tandem holds them one value per byte. */
int dtype_packed_bits(tdm_dtype dt);

/* Product of dims with overflow check; -1 on overflow or a negative dim. */
int shape_count(int rank, const int64_t *dims, size_t *out);
/* C-order strides (in elements) of a shape. */
void shape_strides(int rank, const int64_t *dims, int64_t *strides);
int shape_equal(int ra, const int64_t *a, int rb, const int64_t *b);
/* "1x3x224x224" ("scalar" for rank 0) into buf. */
const char *shape_str(int rank, const int64_t *dims, char *buf, size_t size);

/* Allocates a tensor with uninitialised data (zeroed for strings: NULL
 * pointers stand for empty strings). Errors go to e. */
tdm_status tensor_new(tdm_err *e, tdm_dtype dtype, int rank, const int64_t *dims, tdm_tensor **out);
/* (Re)shapes t in place and allocates its data (old data freed). */
tdm_status tensor_alloc(tdm_err *e, tdm_tensor *t, tdm_dtype dtype, int rank, const int64_t *dims);
/* A map (TDM_KIND_MAP) of 1-D keys (int64 or string) and 1-D values of the
 * same length; takes ownership of both, also on failure. */
tdm_status tensor_map_new(tdm_err *e, tdm_tensor *keys, tdm_tensor *values, tdm_tensor **out);
/* A tensor that borrows data owned by someone else (data in a file
 * mapping: the view holds a reference to it too). */
tdm_status tensor_view(tdm_err *e, const tdm_tensor *src, tdm_tensor **out);
tdm_status tensor_clone(tdm_err *e, const tdm_tensor *src, tdm_tensor **out);
/* A copy of a constant (an initializer's) that shares src's data: a file
 * mapping's, or src's own heap data, which src then hands to a shared
 * block (file_map.heap) on the first share; one more reference, nothing
 * read or copied (a clone only for strings and borrowed data). immutable is
 * kept. Never for a value that may be written. */
tdm_status tensor_share(tdm_err *e, const tdm_tensor *src, tdm_tensor **out);
/* t's data are no longer needed in memory (a kernel has cached a derived
 * form, tensor_aux): when they lie in a file mapping, their pages are
 * dropped (a later read pages them in again from the file); else nothing. */
void tensor_drop_pages(const tdm_tensor *t);
/* 1 when t's data lie in a file mapping, whose pages can be dropped and read
 * in again from the file (not a shared heap block). */
int tensor_in_file(const tdm_tensor *t);
/* 1 when t's data lie where a load of its element type may not be made
 * (a mapping's bytes at an odd offset): only bytes may be read there
 * (memcpy), until tensor_align. */
int tensor_misaligned(const tdm_tensor *t);
/* t's data, aligned for its type: when they lie misaligned in a mapping,
 * an aligned heap copy is made once and t->data points to it from then on
 * (kept with t: the same bytes; safe from several threads, a reader of the
 * old pointer still reads the mapping). NULL when out of memory. For the
 * readers of a constant that load its elements (ops/node_ctx.c op_run does
 * it for every kernel input but the ones a kernel packs itself). */
const void *tensor_align(const tdm_tensor *t);
/* t's data aligned for reading once: t->data itself, or a temporary
 * aligned copy in *tmp (mem_free it after) when they lie misaligned. NULL
 * when out of memory. The packers read through it, so that a constant that
 * only a packer reads is never copied for good. */
const void *tensor_read_aligned(const tdm_tensor *t, void **tmp);
/* The same for p[0, len) only, when it lies inside t's data (t may be
 * NULL: nothing is done). */
void tensor_drop_span(const tdm_tensor *t, const void *p, size_t len);
/* Releases data and items, leaving an empty shell (kind TENSOR, rank 0). */
void tensor_reset(tdm_tensor *t);
/* Element as double / int64 / writes from double / int64 (numeric and bool types). */
double tensor_get_f64(const tdm_tensor *t, size_t i);
int64_t tensor_get_i64(const tdm_tensor *t, size_t i);
void tensor_set_f64(tdm_tensor *t, size_t i, double v);
void tensor_set_i64(tdm_tensor *t, size_t i, int64_t v);
/* String element (never NULL: "" for an empty one). */
const char *tensor_str(const tdm_tensor *t, size_t i);

/* 1 when the host stores integers little-endian. */
int host_is_le(void);
/* Converts count elements of dt between little-endian (file) order and host
 * order, in place: a no-op on little-endian hosts and for 1-byte types; each
 * half of a complex value is swapped on its own. */
void tensor_swap_le(void *data, tdm_dtype dt, size_t count);

/* IEEE half and bfloat16 conversions (round to nearest even). */
float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);
float bf16_to_f32(uint16_t b);
uint16_t f32_to_bf16(float f);

#endif
