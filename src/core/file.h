/* Files a user names: one gate for every reader (models and their external
 * data, .npy and .pb values, calibration files, vnpu profiles, plugins).
 * A file is read only when it is a regular file of at most its kind's
 * size limit, so that /dev/zero, a FIFO or a folder is refused at once
 * instead of being read until memory runs out. The limits are documented in
 * README.md ("Limits on files"). */
#ifndef TDM_CORE_FILE_H
#define TDM_CORE_FILE_H

#include "core/err.h"

#include <stddef.h>
#include <stdint.h>

/* What kind of file a reader takes: its name in sentences, its size limit
 * and the statuses of a refusal. */
typedef struct file_kind {
    const char *what;     /* "model", "calibration file", … */
    const char *label;    /* what the limit is for: "a model", … */
    uint64_t max_bytes;   /* larger files are refused with too_large */
    tdm_status io;        /* missing, unreadable or not a regular file */
    tdm_status too_large; /* past max_bytes */
} file_kind;

/* The kinds (file.c): limits and statuses in one table. */
extern const file_kind file_model;       /* .onnx: 2 GiB, protobuf's own limit */
extern const file_kind file_external;    /* external data: no limit of its own (the tensor's bytes are read) */
extern const file_kind file_value_pb;    /* ONNX .pb value: 2 GiB */
extern const file_kind file_value_npy;   /* .npy value: 16 GiB */
extern const file_kind file_calibration; /* calibration JSON: 256 MiB */
extern const file_kind file_profile;     /* vnpu profile JSON: 16 MiB */
extern const file_kind file_plugin;      /* plugin shared library: no limit */

/* Opens path read-only (never blocking on a FIFO) when it is a regular file
 * within k's limit. On success *fd is open and *size is the file's size;
 * on failure *fd is -1 and e holds one sentence naming the path. */
tdm_status file_open(tdm_err *e, const file_kind *k, const char *path, int *fd, uint64_t *size);

/* A whole file in memory: mapped read-only when it can be, else read. */
typedef struct file_data {
    const uint8_t *data; /* NULL for an empty file */
    size_t size;
    int mapped;
} file_data;

/* Reads path whole (after file_open's checks); release with file_release. */
tdm_status file_load(tdm_err *e, const file_kind *k, const char *path, file_data *out);
void file_release(file_data *d);

/* A read-only, private mapping of (part of) a file whose bytes are tensor
 * data (issue 20 item 5: weights are mapped, not copied, and paged in only
 * when a kernel reads them). Shared by reference count: each tensor whose
 * data lies inside holds one reference (core/tensor.h, tdm_tensor.map).
 * The pages are the file's own (clean), so they can be dropped from memory
 * at any time (file_map_drop) and a later read pages them in again. */
typedef struct file_map {
    const uint8_t *base; /* the mapping (page-aligned) */
    size_t size;         /* its length */
    _Atomic size_t refs;
    int heap;            /* base is a heap buffer several tensors share
                          * (core/tensor.c tensor_share): freed with the last
                          * reference, its pages never dropped */
} file_map;

/* Takes over a whole-file mapping made by file_load (d->mapped): one
 * reference, the caller's; d is left empty. NULL (d untouched) when out of
 * memory or d is not mapped. */
file_map *file_map_adopt(file_data *d);
/* Maps fd's bytes [off, off + len) (len > 0) into *out; *at is where they
 * start. *out is NULL when the range cannot be mapped (the caller reads it
 * instead). -1 when out of memory, else 0. */
int file_map_range(int fd, uint64_t off, size_t len, file_map **out, const uint8_t **at);
/* Takes over the heap buffer p[0, n) (from tensor_alloc or mem_alloc) as a
 * shared block of one reference (file_map.heap); NULL when out of memory. */
file_map *file_map_heap(void *p, size_t n);
/* One more reference to m (NULL stays NULL). */
file_map *file_map_ref(file_map *m);
/* Drops a reference; the last one unmaps. NULL is a no-op. */
void file_map_unref(file_map *m);
/* Drops the resident pages of p[0, len) from memory (outward: every page
 * the range touches; inward: only the pages wholly inside it). For mapped
 * file bytes only: they are never written, so a later read of them (or of
 * a neighbour sharing a page) pages them in again from the file. */
void file_drop_pages(const void *p, size_t len, int inward);

/* Reads path whole into a new NUL-terminated buffer (for text formats);
 * *len excludes the NUL. Free with mem_free. */
tdm_status file_read_text(tdm_err *e, const file_kind *k, const char *path, char **text, size_t *len);

/* A full pread() of len bytes at off; 0 on success, else errno (EIO at a
 * premature end). */
int file_pread(int fd, void *buf, size_t len, uint64_t off);

#endif
