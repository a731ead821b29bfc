/* Shared by the loader's files (src/onnx): the protobuf wire walker, the
 * TensorProto converter and the load context. Not used outside src/onnx. */
#ifndef TDM_ONNX_INTERNAL_H
#define TDM_ONNX_INTERNAL_H

#include "core/file.h"
#include "onnx/onnx.h"
#include "onnx.pb-c.h"

#include <stddef.h>
#include <stdint.h>

/* Subgraphs (If/Loop/Scan bodies) may nest this deep below the main graph. */
#define ONNX_MAX_GRAPH_DEPTH 64
/* Protobuf messages may nest this deep (protobuf-c recurses once per level
 * and has no limit of its own). 64 graph levels need about 200. */
#define ONNX_MAX_MSG_DEPTH 256
/* A sparse tensor is refused when its dense form would exceed this many
 * bytes: its declared dims cost nothing in the file. */
#define ONNX_MAX_SPARSE_DENSE_BYTES ((size_t)1 << 30)

/* ---- protobuf wire format ---- */

enum { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2, PB_I32 = 5 };

typedef struct onnx_pbfield {
    uint32_t num;    /* field number */
    int wire;        /* wire type */
    size_t start;    /* offset of the tag */
    size_t data;     /* offset of the value (of the payload for PB_LEN) */
    size_t len;      /* payload bytes (PB_LEN) */
    size_t end;      /* offset just past the field */
    uint64_t v;      /* the value of a PB_VARINT field */
} onnx_pbfield;

/* Reads the field at *pos of a message that ends at end. Returns 1 and fills
 * f (and advances *pos), 0 at the end of the message, -1 when the bytes are
 * not well-formed (*pos is then the offset of the fault). */
int onnx_pb_next(const uint8_t *buf, size_t end, size_t *pos, onnx_pbfield *f, const char **why);

/* Outcome of onnx_pb_check. */
typedef enum onnx_pbcheck {
    ONNX_PB_OK = 0,
    ONNX_PB_MALFORMED,   /* not well-formed, or a field of the wrong wire type */
    ONNX_PB_GRAPH_DEPTH, /* subgraphs nested deeper than ONNX_MAX_GRAPH_DEPTH */
    ONNX_PB_MSG_DEPTH    /* messages nested deeper than ONNX_MAX_MSG_DEPTH */
} onnx_pbcheck;

/* Walks buf as a message of type d (iteratively, so any nesting is safe) and
 * checks what protobuf-c would otherwise recurse into or reject: framing,
 * wire types of known fields, message and graph nesting. graph_depth is the
 * number of GraphProto levels already around buf. On failure *at is the
 * offset of the fault in buf and *why a static phrase. */
onnx_pbcheck onnx_pb_check(const uint8_t *buf, size_t len, const ProtobufCMessageDescriptor *d, int graph_depth,
                           size_t *at, const char **why);

/* ---- load context ---- */

typedef struct onnx_ctx {
    tdm_err *e;
    const char *fname;  /* the file's name for messages */
    const char *dir;    /* folder external data resolves in; NULL: refused */
    char *rdir;         /* realpath(dir), computed on first use */
    gr_model *m;        /* for interning dimension symbols (may be NULL) */
    /* raw_data of the TensorProto being converted that lies in a file
     * mapping (its raw_data.data is then NULL, raw_data.len its length):
     * taken as the tensor's data in place (load.c, take_initializer) */
    file_map *raw_map;
    const uint8_t *raw_at;
} onnx_ctx;

/* Bytes below which a tensor is read rather than mapped (a mapping costs a
 * page and a system call). */
#define ONNX_MAP_MIN_BYTES ((size_t)4096)
/* 1 when len bytes at `at` (an address, or a file offset: a mapping keeps
 * the offset's place in its page), in the file's (little-endian) order,
 * can be the data of a tensor of element type dt as they are: a host that
 * stores little-endian, one value per element (not int4 and the like), at
 * least ONNX_MAP_MIN_BYTES. They need not be aligned for the type (inline
 * raw_data seldom is): a tensor whose are not is tensor_misaligned, and
 * the readers that load its elements align it (core/tensor.h). */
int onnx_can_map(int dt, uint64_t at, size_t len);

void onnx_ctx_free(onnx_ctx *c);

/* Converts a TensorProto. Takes the proto's data buffers where it can (raw
 * data, float/double/int64 arrays): the proto is left without them. what
 * names the tensor in messages ("initializer 'w'"). */
tdm_status onnx_tensor_from_proto(onnx_ctx *c, Onnx__TensorProto *tp, const char *what, tdm_tensor **out);

/* Densifies a SparseTensorProto. */
tdm_status onnx_sparse_from_proto(onnx_ctx *c, Onnx__SparseTensorProto *sp, const char *what, tdm_tensor **out);

/* Unpacks a message that onnx_pb_check accepted; NULL when protobuf-c fails. */
ProtobufCMessage *onnx_pb_unpack(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t len);

/* Reads a whole file of kind k (core/file.h: a regular file within the
 * kind's size limit): mapped read-only when it can be (*mapped set; release
 * with onnx_file_release), else read into memory. The sentence names the
 * path. An empty file yields *size 0 and *data NULL. */
tdm_status onnx_file_read(tdm_err *e, const file_kind *k, const char *path, const uint8_t **data, size_t *size,
                          int *mapped);
void onnx_file_release(const uint8_t *data, size_t size, int mapped);
/* Drops the pages of buf[off, off+len) from memory (mapped files only). */
void onnx_file_drop(const uint8_t *data, size_t size, size_t off, size_t len);

/* open(O_RDONLY) / close() / a full pread() (0 on success) for the loader's
 * direct reads of raw data. */
int onnx_file_open(const char *path);
void onnx_file_close(int fd);
int onnx_file_pread(int fd, void *buf, size_t len, size_t off);

/* Model-local functions (functions.c): every call among nodes[0, *n_nodes)
 * replaced by the function's body (renamed, attributes resolved, nested
 * calls expanded), recorded in c->m->fn_calls. The array is replaced (its
 * NodeProtos owned as before); on failure the nodes not yet moved stay in
 * it and the others are freed (entries set to NULL). */
tdm_status onnx_fn_inline(onnx_ctx *c, const Onnx__ModelProto *mp, Onnx__NodeProto ***nodes, size_t *n_nodes,
                          size_t *cap_nodes);
/* For a subgraph's nodes (owned by their GraphProto): when one calls a
 * function of mp (may be NULL), *out is a new list of owned copies with the
 * calls expanded (not recorded; free with onnx_fn_nodes_free); else NULL. */
tdm_status onnx_fn_inline_copy(onnx_ctx *c, const Onnx__ModelProto *mp, Onnx__NodeProto *const *nodes, size_t n,
                               Onnx__NodeProto ***out, size_t *n_out);
void onnx_fn_nodes_free(Onnx__NodeProto **nodes, size_t n);

/* The last path component of path (a pointer into path). */
const char *onnx_basename(const char *path);
/* A copy of the folder part of path ("." when there is none). */
char *onnx_dirname(const char *path);

#endif
