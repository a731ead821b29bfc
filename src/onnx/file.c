/* Files for the loader: whole files mapped read-only (through the one gate
 * of core/file.h), pages dropped once their bytes have been copied out, so
 * that a model's weights are resident once, not twice. */
#define _DEFAULT_SOURCE
#include "onnx/internal.h"
#include "core/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

const char *onnx_basename(const char *path)
{
    const char *s = strrchr(path, '/');
    return s && s[1] ? s + 1 : path;
}

char *onnx_dirname(const char *path)
{
    const char *s = strrchr(path, '/');
    if (!s)
        return mem_strdup(".");
    if (s == path)
        return mem_strdup("/");
    return mem_strndup(path, (size_t)(s - path));
}

tdm_status onnx_file_read(tdm_err *e, const file_kind *k, const char *path, const uint8_t **data, size_t *size,
                          int *mapped)
{
    file_data d;
    tdm_status st = file_load(e, k, path, &d);
    *data = d.data;
    *size = d.size;
    *mapped = d.mapped;
    return st;
}

void onnx_file_release(const uint8_t *data, size_t size, int mapped)
{
    file_data d = {data, size, mapped};
    file_release(&d);
}

void onnx_file_drop(const uint8_t *data, size_t size, size_t off, size_t len)
{
    if (!data || off >= size)
        return;
    file_drop_pages(data + off, len < size - off ? len : size - off, 0);
}

int onnx_file_open(const char *path) { return open(path, O_RDONLY); }

void onnx_file_close(int fd)
{
    if (fd >= 0)
        close(fd);
}

int onnx_file_pread(int fd, void *buf, size_t len, size_t off) { return file_pread(fd, buf, len, off) ? -1 : 0; }
