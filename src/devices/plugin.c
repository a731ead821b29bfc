/* Plugin devices: shared libraries built against include/tandem/device.h
 * alone, loaded by path with dlopen, entered through
 * TDM_DEVICE_PLUGIN_SYMBOL. A device whose api_version is newer than
 * tandem's (or 0) is refused with both numbers; an older one is used
 * without the members it lacks (since 3: rewrite, read by plan/rescue_dev.c
 * only from a table of version 3 or later). */
#define _POSIX_C_SOURCE 200809L
#include "devices/device_internal.h"
#include "core/file.h"
#include "core/mem.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct dev_plugin {
    void *handle;
    tdm_device_plugin_init_fn init;
    char *path;
    char *stem;
    const char *base; /* file name within path */
};

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* "libfoo-dev.so.1" → "foo-dev". */
static char *make_stem(const char *path)
{
    const char *b = base_name(path);
    if (strncmp(b, "lib", 3) == 0 && b[3] && b[3] != '.')
        b += 3;
    const char *dot = strchr(b, '.');
    return mem_strndup(b, dot ? (size_t)(dot - b) : strlen(b));
}

void dev_plugin_unload(dev_plugin *p)
{
    if (!p)
        return;
    if (p->handle)
        dlclose(p->handle);
    mem_free(p->path);
    mem_free(p->stem);
    mem_free(p);
}

tdm_status dev_plugin_load(tdm_err *e, const char *path, dev_plugin **out)
{
    *out = NULL;
    if (!path || !*path)
        return err_set(e, TDM_E_DEVICE, "a plugin path is empty");
    /* the one gate for user files: a regular file (dlopen maps it) */
    int fd;
    uint64_t fsize;
    tdm_status opened = file_open(e, &file_plugin, path, &fd, &fsize);
    if (opened)
        return opened;
    close(fd);
    dev_plugin *p = mem_calloc(1, sizeof *p);
    if (!p || !(p->path = mem_strdup(path)) || !(p->stem = make_stem(path))) {
        dev_plugin_unload(p);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    p->base = base_name(p->path);
    /* dlopen searches the library path for a name without '/': make the
     * path explicit so that the file checked above is the one loaded. */
    char *load = NULL;
    if (!strchr(path, '/')) {
        size_t n = strlen(path) + 3;
        if (!(load = mem_alloc(n))) {
            dev_plugin_unload(p);
            return err_set(e, TDM_E_NOMEM, "out of memory");
        }
        snprintf(load, n, "./%s", path);
    }
    dlerror();
    p->handle = dlopen(load ? load : path, RTLD_NOW | RTLD_LOCAL);
    mem_free(load);
    if (!p->handle) {
        const char *why = dlerror();
        tdm_status st = err_set(e, TDM_E_DEVICE, "plugin %s cannot be loaded: %s", path, why ? why : "dlopen failed");
        dev_plugin_unload(p);
        return st;
    }
    dlerror();
    void *sym = dlsym(p->handle, TDM_DEVICE_PLUGIN_SYMBOL);
    if (!sym) {
        tdm_status st = err_set(e, TDM_E_DEVICE, "plugin %s is not a tandem device: it does not export %s",
                                p->base, TDM_DEVICE_PLUGIN_SYMBOL);
        dev_plugin_unload(p);
        return st;
    }
    memcpy(&p->init, &sym, sizeof p->init);
    *out = p;
    return TDM_OK;
}

const char *dev_plugin_path(const dev_plugin *p) { return p->path; }
const char *dev_plugin_stem(const dev_plugin *p) { return p->stem; }

tdm_status dev_plugin_open(tdm_err *e, dev_plugin *p, const char *args, dev_instance *out)
{
    char msg[512] = "";
    tdm_device dev = {NULL, NULL};
    memset(out, 0, sizeof *out);
    tdm_status st = p->init(args ? args : "", &dev, msg, sizeof msg);
    msg[sizeof msg - 1] = 0;
    if (st != TDM_OK)
        return err_set(e, TDM_E_DEVICE, "plugin %s failed to start: %s", p->base,
                       *msg ? msg : tdm_status_str(st));
    if (!dev.iface)
        return err_set(e, TDM_E_DEVICE, "plugin %s returned no device table", p->base);
    if (dev.iface->api_version < 1 || dev.iface->api_version > TDM_DEVICE_API_VERSION) {
        unsigned v = dev.iface->api_version;
        /* Members only grow at the end: a newer table still has destroy where
         * ours does; version 0 is no version, so its ctx is left alone. */
        if (v > TDM_DEVICE_API_VERSION && dev.iface->destroy)
            dev.iface->destroy(dev.ctx);
        return err_set(e, TDM_E_DEVICE, "plugin %s was built for device API %u, tandem speaks %d", p->base, v,
                       TDM_DEVICE_API_VERSION);
    }
    const char *missing = !dev.iface->name            ? "name"
                          : !dev.iface->supports       ? "supports"
                          : !dev.iface->buffer_alloc   ? "buffer_alloc"
                          : !dev.iface->buffer_free    ? "buffer_free"
                          : !dev.iface->copy_to_device ? "copy_to_device"
                          : !dev.iface->copy_to_host   ? "copy_to_host"
                          : !dev.iface->run            ? "run"
                          /* since 3: a rewrite needs its free, or the plugin's memory would leak */
                          : dev.iface->api_version >= 3 && dev.iface->rewrite && !dev.iface->rewrite_free
                              ? "rewrite_free (it has rewrite)"
                              : NULL;
    const char *name = missing ? NULL : dev.iface->name(dev.ctx);
    if (missing || !name || !*name) {
        if (dev.iface->destroy)
            dev.iface->destroy(dev.ctx);
        if (missing)
            return err_set(e, TDM_E_DEVICE, "plugin %s's device table lacks the required member %s", p->base,
                           missing);
        return err_set(e, TDM_E_DEVICE, "plugin %s's device has no name", p->base);
    }
    if (!(out->name = mem_strdup(name))) {
        if (dev.iface->destroy)
            dev.iface->destroy(dev.ctx);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    out->dev = dev;
    out->kind = DEV_KIND_PLUGIN;
    out->ext = NULL;
    out->plugin = NULL;
    return TDM_OK;
}

int dev_has_rewrite(const dev_instance *di)
{
    const tdm_device_iface *f = di ? di->dev.iface : NULL;
    return f && f->api_version >= 3 && f->rewrite && f->rewrite_free;
}

int dev_rewrite_get(const dev_instance *di, const tdm_node_desc *node, tdm_rewrite *out)
{
    memset(out, 0, sizeof *out);
    if (!dev_has_rewrite(di))
        return 0;
    int r = di->dev.iface->rewrite(di->dev.ctx, node, out);
    return r > 0 ? 1 : r;
}

void dev_rewrite_release(const dev_instance *di, tdm_rewrite *rw)
{
    if (dev_has_rewrite(di))
        di->dev.iface->rewrite_free(di->dev.ctx, rw);
}
