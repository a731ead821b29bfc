/* NumPy .npy encoding and decoding, behind tdm_value_load (onnx/value_load.c)
 * and tdm_tensor_save_npy. The decoder takes bytes so that it can be fuzzed
 * without touching the file system. */
#ifndef TDM_CORE_NPY_H
#define TDM_CORE_NPY_H

#include "core/err.h"

#include <stddef.h>

/* Decodes a whole .npy file (format 1.0–3.0, C order, little-endian or
 * byte-order-free types, '<U…'/'|S…' strings). path is used in messages
 * only. Errors: TDM_E_INPUT (undecodable, with a sentence naming path),
 * TDM_E_NOMEM. */
tdm_status npy_decode(tdm_err *e, const char *path, const void *bytes, size_t size, tdm_tensor **out);

/* Reads the file at path (through core/file.h's gate: a regular file of at
 * most 16 GiB) and decodes it (npy_decode). */
tdm_status npy_load_file(tdm_err *e, const char *path, tdm_tensor **out);

/* *is_npy = 1 when the file at path begins with the .npy magic, else 0.
 * Fails (TDM_E_IO) when it cannot be opened through the same gate. */
tdm_status npy_sniff_file(tdm_err *e, const char *path, int *is_npy);

/* Encodes a tensor as a .npy 1.0 file into a new buffer (mem_free it). */
tdm_status npy_encode(tdm_err *e, const tdm_tensor *t, unsigned char **out, size_t *size);

/* Encodes t and writes it to path through a temporary file in the same
 * folder; an existing path is replaced only when overwrite != 0. */
tdm_status npy_write_file(tdm_err *e, const tdm_tensor *t, const char *path, int overwrite);

/* Writes size bytes to path the same way (a temporary file in the same
 * folder, then renamed or linked): also the writer of .pb values. */
tdm_status npy_write_bytes(tdm_err *e, const char *path, const unsigned char *buf, size_t size, int overwrite);

#endif
