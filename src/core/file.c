/* One gate for the files a user names (see file.h): regular files within
 * their kind's size limit, opened without blocking, read whole by mapping
 * (or by reading exactly the size fstat gave). */
#define _DEFAULT_SOURCE
#include "core/file.h"
#include "core/mem.h"

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define KIB ((uint64_t)1 << 10)
#define MIB ((uint64_t)1 << 20)
#define GIB ((uint64_t)1 << 30)
#define NO_LIMIT UINT64_MAX

/* README.md "Limits on files" lists these; keep the two in step. */
const file_kind file_model = {"model", "a model (protobuf's own limit)", 2 * GIB, TDM_E_IO, TDM_E_MODEL};
const file_kind file_external = {"external data file", "external data", NO_LIMIT, TDM_E_IO, TDM_E_MODEL};
const file_kind file_value_pb = {"file", "an ONNX .pb value (protobuf's own limit)", 2 * GIB, TDM_E_IO, TDM_E_INPUT};
const file_kind file_value_npy = {"file", "a .npy value", 16 * GIB, TDM_E_IO, TDM_E_INPUT};
const file_kind file_calibration = {"calibration file", "a calibration file", 256 * MIB, TDM_E_IO, TDM_E_INPUT};
/* A profile is part of a device: every failure to open one is a device error. */
/* A profile or plugin file that is missing, unreadable or not a regular file
 * is an I/O error (exit 5) like any other file; what is wrong inside one is
 * the device's (exit 4). */
const file_kind file_profile = {"vnpu profile", "a vnpu profile", 16 * MIB, TDM_E_IO, TDM_E_DEVICE};
const file_kind file_plugin = {"plugin", "a plugin", NO_LIMIT, TDM_E_IO, TDM_E_DEVICE};

/* "16 GiB", "2.5 MiB", "812 bytes". */
static const char *size_str(uint64_t n, char *buf, size_t size)
{
    static const struct {
        uint64_t unit;
        const char *name;
    } units[] = {{GIB, "GiB"}, {MIB, "MiB"}, {KIB, "KiB"}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (n < units[i].unit)
            continue;
        if (n % units[i].unit == 0)
            snprintf(buf, size, "%llu %s", (unsigned long long)(n / units[i].unit), units[i].name);
        else
            snprintf(buf, size, "%.1f %s", (double)n / (double)units[i].unit, units[i].name);
        return buf;
    }
    snprintf(buf, size, "%llu bytes", (unsigned long long)n);
    return buf;
}

static const char *mode_str(mode_t m)
{
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISSOCK(m))
        return "a socket";
    return "a special file";
}

tdm_status file_open(tdm_err *e, const file_kind *k, const char *path, int *fd, uint64_t *size)
{
    *fd = -1;
    *size = 0;
    if (!path || !*path)
        return err_set(e, TDM_E_USAGE, "no %s was given", k->what);
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
     * writer; it changes nothing for the regular files that are kept. */
    int f = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (f < 0) {
        int err = errno;
        if (err == ENOENT)
            return err_set(e, k->io, "%s '%s' does not exist", k->what, path);
        return err_set(e, k->io, "%s '%s' cannot be opened: %s", k->what, path, strerror(err));
    }
    struct stat sb;
    if (fstat(f, &sb) != 0) {
        int err = errno;
        close(f);
        return err_set(e, k->io, "%s '%s' cannot be read: %s", k->what, path, strerror(err));
    }
    if (S_ISDIR(sb.st_mode)) {
        close(f);
        return err_set(e, k->io, "%s '%s' is a folder, not a file", k->what, path);
    }
    if (!S_ISREG(sb.st_mode)) {
        close(f);
        return err_set(e, k->io, "%s '%s' is %s, not a regular file", k->what, path, mode_str(sb.st_mode));
    }
    uint64_t n = sb.st_size < 0 ? 0 : (uint64_t)sb.st_size;
    if (n > k->max_bytes || n > SIZE_MAX) {
        char have[32], lim[32];
        close(f);
        if (n > k->max_bytes)
            return err_set(e, k->too_large, "%s '%s' is %s, past the %s limit for %s", k->what, path,
                           size_str(n, have, sizeof have), size_str(k->max_bytes, lim, sizeof lim), k->label);
        return err_set(e, k->too_large, "%s '%s' is %s, more than this machine can address", k->what, path,
                       size_str(n, have, sizeof have));
    }
    /* back to blocking reads (a regular file ignores the flag; be plain) */
    int fl = fcntl(f, F_GETFL);
    if (fl >= 0)
        (void)fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
    *fd = f;
    *size = n;
    return TDM_OK;
}

int file_pread(int fd, void *buf, size_t len, uint64_t off)
{
    size_t got = 0;
    uint8_t *p = buf;
    while (got < len) {
        ssize_t r = pread(fd, p + got, len - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return errno ? errno : EIO;
        if (r == 0)
            return EIO;
        got += (size_t)r;
    }
    return 0;
}

/* Reads size bytes of fd into a new buffer with extra bytes after them. */
static tdm_status read_all(tdm_err *e, const file_kind *k, const char *path, int fd, size_t size, size_t extra,
                           uint8_t **out)
{
    size_t cap;
    *out = NULL;
    if (mem_add(size, extra, &cap))
        return err_set(e, TDM_E_NOMEM, "%s '%s' is too large to read", k->what, path);
    uint8_t *buf = mem_alloc(cap ? cap : 1);
    if (!buf)
        return err_set(e, TDM_E_NOMEM, "out of memory reading %s '%s'", k->what, path);
    int err = file_pread(fd, buf, size, 0);
    if (err) {
        mem_free(buf);
        return err_set(e, k->io, "%s '%s' cannot be read: %s", k->what, path,
                       err == EIO ? "it ended early (did it change while being read?)" : strerror(err));
    }
    *out = buf;
    return TDM_OK;
}

tdm_status file_load(tdm_err *e, const file_kind *k, const char *path, file_data *out)
{
    memset(out, 0, sizeof *out);
    int fd;
    uint64_t n;
    tdm_status st = file_open(e, k, path, &fd, &n);
    if (st)
        return st;
    if (n == 0) {
        close(fd);
        return TDM_OK;
    }
    void *p = mmap(NULL, (size_t)n, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
        close(fd);
        out->data = p;
        out->size = (size_t)n;
        out->mapped = 1;
        return TDM_OK;
    }
    /* a file system that cannot map: read it */
    uint8_t *buf;
    st = read_all(e, k, path, fd, (size_t)n, 0, &buf);
    close(fd);
    if (st)
        return st;
    out->data = buf;
    out->size = (size_t)n;
    return TDM_OK;
}

void file_release(file_data *d)
{
    if (!d || !d->data)
        return;
    if (d->mapped)
        munmap((void *)(uintptr_t)d->data, d->size);
    else
        mem_free((void *)(uintptr_t)d->data);
    memset(d, 0, sizeof *d);
}

file_map *file_map_adopt(file_data *d)
{
    if (!d || !d->mapped || !d->data)
        return NULL;
    file_map *m = mem_calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->base = d->data;
    m->size = d->size;
    atomic_init(&m->refs, 1);
    memset(d, 0, sizeof *d);
    return m;
}

int file_map_range(int fd, uint64_t off, size_t len, file_map **out, const uint8_t **at)
{
    long ps = sysconf(_SC_PAGESIZE);
    *out = NULL;
    *at = NULL;
    if (ps <= 0 || len == 0 || fd < 0)
        return 0;
    uint64_t lo = off - off % (uint64_t)ps, n = off - lo + (uint64_t)len;
    if (n < len || n > SIZE_MAX || lo > (uint64_t)INT64_MAX)
        return 0;
    file_map *m = mem_calloc(1, sizeof *m);
    if (!m)
        return -1;
    void *p = mmap(NULL, (size_t)n, PROT_READ, MAP_PRIVATE, fd, (off_t)lo);
    if (p == MAP_FAILED) {
        mem_free(m);
        return 0;
    }
    m->base = p;
    m->size = (size_t)n;
    atomic_init(&m->refs, 1);
    *at = m->base + (off - lo);
    *out = m;
    return 0;
}

file_map *file_map_heap(void *p, size_t n)
{
    file_map *m = p ? mem_calloc(1, sizeof *m) : NULL;
    if (!m)
        return NULL;
    m->base = p;
    m->size = n;
    m->heap = 1;
    atomic_init(&m->refs, 1);
    return m;
}

file_map *file_map_ref(file_map *m)
{
    if (m)
        atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
    return m;
}

void file_map_unref(file_map *m)
{
    if (!m || atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (m->heap)
        mem_free((void *)(uintptr_t)m->base); /* a mem_alloc block (arena blocks are too) */
    else
        munmap((void *)(uintptr_t)m->base, m->size);
    mem_free(m);
}

void file_drop_pages(const void *p, size_t len, int inward)
{
#ifdef MADV_DONTNEED
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0 || !p || len == 0)
        return;
    uintptr_t mask = (uintptr_t)ps - 1, a = (uintptr_t)p, b = a + len;
    uintptr_t lo = inward ? (a + mask) & ~mask : a & ~mask, hi = inward ? b & ~mask : (b + mask) & ~mask;
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
#else
    (void)p;
    (void)len;
    (void)inward;
#endif
}

tdm_status file_read_text(tdm_err *e, const file_kind *k, const char *path, char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    int fd;
    uint64_t n;
    tdm_status st = file_open(e, k, path, &fd, &n);
    if (st)
        return st;
    uint8_t *buf;
    st = read_all(e, k, path, fd, (size_t)n, 1, &buf);
    close(fd);
    if (st)
        return st;
    buf[n] = 0;
    *text = (char *)buf;
    *len = (size_t)n;
    return TDM_OK;
}
