/* Files for the loader: whole files mapped read-only, pages dropped once
 * their bytes have been copied out, so that a model's weights are resident
 * once, not twice. */
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

static tdm_status io_fail(tdm_err *e, const char *fname, const char *verb, int err)
{
    if (err == ENOENT)
        return err_set(e, TDM_E_IO, "%s does not exist", fname);
    return err_set(e, TDM_E_IO, "%s cannot be %s: %s", fname, verb, strerror(err));
}

tdm_status onnx_file_read(tdm_err *e, const char *path, const char *fname, const uint8_t **data, size_t *size,
                          int *mapped)
{
    *data = NULL;
    *size = 0;
    *mapped = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return io_fail(e, fname, "opened", errno);
    struct stat sb;
    if (fstat(fd, &sb)) {
        int err = errno;
        close(fd);
        return io_fail(e, fname, "read", err);
    }
    if (S_ISDIR(sb.st_mode)) {
        close(fd);
        return err_set(e, TDM_E_IO, "%s is a folder, not a file", fname);
    }
    if (S_ISREG(sb.st_mode)) {
        if (sb.st_size == 0) {
            close(fd);
            return TDM_OK;
        }
        if ((uint64_t)sb.st_size > SIZE_MAX) {
            close(fd);
            return err_set(e, TDM_E_IO, "%s is too large to read", fname);
        }
        void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            close(fd);
            *data = p;
            *size = (size_t)sb.st_size;
            *mapped = 1;
            return TDM_OK;
        }
        /* fall through to read() when the file cannot be mapped */
    }
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (mem_grow((void **)&buf, &cap, n + 65536, 1)) {
            mem_free(buf);
            close(fd);
            return err_set(e, TDM_E_NOMEM, "out of memory reading %s", fname);
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int err = errno;
            mem_free(buf);
            close(fd);
            return io_fail(e, fname, "read", err);
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (n == 0) {
        mem_free(buf);
        return TDM_OK;
    }
    *data = buf;
    *size = n;
    return TDM_OK;
}

void onnx_file_release(const uint8_t *data, size_t size, int mapped)
{
    if (!data)
        return;
    if (mapped)
        munmap((void *)(uintptr_t)data, size);
    else
        mem_free((void *)(uintptr_t)data);
}

void onnx_file_drop(const uint8_t *data, size_t size, size_t off, size_t len)
{
#ifdef MADV_DONTNEED
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0 || !data || len == 0 || off >= size)
        return;
    uintptr_t base = (uintptr_t)data;
    uintptr_t lo = (base + off) & ~((uintptr_t)ps - 1);
    uintptr_t hi = base + off + (len < size - off ? len : size - off);
    /* the pages hold file bytes only (the mapping is never written), so a
     * later read of a neighbouring field simply faults them back in */
    madvise((void *)lo, hi - lo, MADV_DONTNEED);
#else
    (void)data;
    (void)size;
    (void)off;
    (void)len;
#endif
}

int onnx_file_open(const char *path) { return open(path, O_RDONLY); }

void onnx_file_close(int fd)
{
    if (fd >= 0)
        close(fd);
}

int onnx_file_pread(int fd, void *buf, size_t len, size_t off)
{
    size_t got = 0;
    uint8_t *p = buf;
    while (got < len) {
        ssize_t r = pread(fd, p + got, len - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}
