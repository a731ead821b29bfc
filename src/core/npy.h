/* NumPy .npy encoding and decoding, behind tdm_value_load and
 * tdm_tensor_save_npy. The decoder takes bytes so that it can be fuzzed
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

/* Encodes a tensor as a .npy 1.0 file into a new buffer (mem_free it). */
tdm_status npy_encode(tdm_err *e, const tdm_tensor *t, unsigned char **out, size_t *size);

/* Encodes t and writes it to path through a temporary file in the same
 * folder; an existing path is replaced only when overwrite != 0. */
tdm_status npy_write_file(tdm_err *e, const tdm_tensor *t, const char *path, int overwrite);

/* Writes size bytes to path the same way (a temporary file in the same
 * folder, then renamed or linked): also the writer of .pb values. */
tdm_status npy_write_bytes(tdm_err *e, const char *path, const unsigned char *buf, size_t size, int overwrite);

#endif
