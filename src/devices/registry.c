/* The device registry: parses the --devices list, opens built-in devices
 * and plugins in priority order with cpu last, and lists every known device
 * kind for `tandem devices`. */
#define _POSIX_C_SOURCE 200809L
#include "devices/device_internal.h"
#include "devices/opencl/opencl.h"
#include "core/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *tdm_reason_str(tdm_reason reason)
{
    switch (reason) {
    case TDM_REASON_OK: return "OK";
    case TDM_REASON_OP_UNSUPPORTED: return "OP_UNSUPPORTED";
    case TDM_REASON_DTYPE_UNSUPPORTED: return "DTYPE_UNSUPPORTED";
    case TDM_REASON_ATTR_UNSUPPORTED: return "ATTR_UNSUPPORTED";
    case TDM_REASON_SHAPE_UNSUPPORTED: return "SHAPE_UNSUPPORTED";
    case TDM_REASON_MEMORY: return "MEMORY";
    case TDM_REASON_PRECISION: return "PRECISION";
    case TDM_REASON_COST: return "COST";
    case TDM_REASON_GRANULARITY: return "GRANULARITY";
    case TDM_REASON_USER: return "USER";
    case TDM_REASON_DEVICE_FAULT: return "DEVICE_FAULT";
    case TDM_REASON_RESCUED: return "RESCUED";
    }
    return "UNKNOWN";
}

const char *dev_kind_str(dev_kind kind)
{
    switch (kind) {
    case DEV_KIND_CPU: return "cpu";
    case DEV_KIND_VNPU: return "vnpu";
    case DEV_KIND_PLUGIN: return "plugin";
    case DEV_KIND_OPENCL: return "opencl";
    }
    return "unknown";
}

void dev_instance_close(dev_instance *d)
{
    if (!d)
        return;
    if (d->dev.iface && d->dev.iface->destroy)
        d->dev.iface->destroy(d->dev.ctx);
    dev_plugin_unload(d->plugin);
    mem_free(d->name);
    memset(d, 0, sizeof *d);
}

/* ---- one entry ---- */

tdm_status dev_open(tdm_err *e, const char *entry, dev_instance *out)
{
    memset(out, 0, sizeof *out);
    const char *colon = strchr(entry, ':');
    size_t nlen = colon ? (size_t)(colon - entry) : strlen(entry);
    const char *args = colon ? colon + 1 : NULL;
    if (nlen == 3 && strncmp(entry, "cpu", 3) == 0) {
        if (args)
            return err_set(e, TDM_E_USAGE, "device 'cpu' takes no argument (got '%s')", entry);
        return dev_cpu_open(e, out);
    }
    if (nlen == 4 && strncmp(entry, "vnpu", 4) == 0)
        return vnpu_open(e, args, out);
    if (nlen == 6 && strncmp(entry, "opencl", 6) == 0) {
        long idx = 0;
        if (args) {
            char *end = NULL;
            idx = strtol(args, &end, 10);
            if (!*args || *end || idx < 0 || idx > 1000000)
                return err_set(e, TDM_E_USAGE, "in '%s', N of opencl:N must be a device number (0, 1, …)", entry);
        }
        tdm_status st = ocl_device_open(e, (int)idx, &out->dev);
        if (st)
            return st;
        const char *nm = out->dev.iface && out->dev.iface->name ? out->dev.iface->name(out->dev.ctx) : NULL;
        if (!(out->name = mem_strdup(nm ? nm : entry))) {
            if (out->dev.iface && out->dev.iface->destroy)
                out->dev.iface->destroy(out->dev.ctx);
            memset(out, 0, sizeof *out);
            return err_set(e, TDM_E_NOMEM, "out of memory");
        }
        out->kind = DEV_KIND_OPENCL;
        out->ext = NULL;
        return TDM_OK;
    }
    if (nlen == 6 && strncmp(entry, "faulty", 6) == 0) /* fault injection (faulty.c) */
        return dev_faulty_open(e, args, out);
    return err_set(e, TDM_E_DEVICE,
                   "unknown device '%.*s': the devices are cpu, vnpu:PROFILE, opencl[:N] and loaded plugins", (int)nlen,
                   entry);
}

/* ---- lists ---- */

typedef struct loaded {
    dev_plugin *p;
    char *probe_name; /* the device name its init("") reports, or NULL */
    char *stem;       /* the library's file stem */
    int used;
} loaded;

static void free_loaded(loaded *ps, size_t n)
{
    for (size_t i = 0; ps && i < n; i++) {
        dev_plugin_unload(ps[i].p);
        mem_free(ps[i].probe_name);
        mem_free(ps[i].stem);
    }
    mem_free(ps);
}

/* Plugin paths: the caller's, then TANDEM_PLUGINS's (colon-separated). */
static tdm_status collect_paths(tdm_err *e, const char *const *paths, size_t n, char ***out, size_t *nout)
{
    const char *env = getenv("TANDEM_PLUGINS");
    size_t cap = n + 1;
    for (const char *s = env; s && *s; s++)
        cap += *s == ':';
    if (env && *env)
        cap++;
    char **v = mem_calloc(cap, sizeof *v);
    if (!v)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (paths[i] && *paths[i] && !(v[k++] = mem_strdup(paths[i])))
            goto nomem;
    for (const char *s = env; s && *s;) {
        const char *end = strchr(s, ':');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (len && k < cap && !(v[k++] = mem_strndup(s, len)))
            goto nomem;
        s = end ? end + 1 : s + len;
    }
    *out = v;
    *nout = k;
    return TDM_OK;
nomem:
    for (size_t i = 0; i < k; i++)
        mem_free(v[i]);
    mem_free(v);
    return err_set(e, TDM_E_NOMEM, "out of memory");
}

static void free_paths(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        mem_free(v[i]);
    mem_free(v);
}

static tdm_status load_plugins(tdm_err *e, const char *const *paths, size_t n, loaded **out, size_t *nout)
{
    char **all = NULL;
    size_t nall = 0;
    tdm_status st = collect_paths(e, paths, n, &all, &nall);
    *out = NULL;
    *nout = 0;
    if (st)
        return st;
    loaded *ps = mem_calloc(nall + 1, sizeof *ps);
    if (!ps) {
        free_paths(all, nall);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    size_t k = 0;
    for (size_t i = 0; i < nall; i++) {
        if ((st = dev_plugin_load(e, all[i], &ps[k].p)) != TDM_OK)
            goto fail;
        if (!(ps[k].stem = mem_strdup(dev_plugin_stem(ps[k].p)))) {
            st = err_set(e, TDM_E_NOMEM, "out of memory");
            k++;
            goto fail;
        }
        dev_instance probe;
        tdm_err pe;
        err_clear(&pe);
        if (dev_plugin_open(&pe, ps[k].p, "", &probe) == TDM_OK) {
            ps[k].probe_name = probe.name;
            probe.name = NULL;
            dev_instance_close(&probe);
        } else if (pe.status == TDM_E_DEVICE && strstr(pe.msg, "was built for device API")) {
            st = err_set(e, TDM_E_DEVICE, "%s", pe.msg);
            k++;
            goto fail;
        }
        k++;
    }
    free_paths(all, nall);
    *out = ps;
    *nout = k;
    return TDM_OK;
fail:
    free_paths(all, nall);
    free_loaded(ps, k);
    return st;
}

void dev_list_close(dev_list *l)
{
    if (!l)
        return;
    /* destroy in reverse order: plugins' libraries unload after their devices */
    for (size_t i = l->n; i-- > 0;)
        dev_instance_close(&l->items[i]);
    mem_free(l->items);
    mem_free(l);
}

static tdm_status list_add(tdm_err *e, dev_list *l, size_t *cap, dev_instance *d)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->items[i].name, d->name) == 0) {
            tdm_status st = err_set(e, TDM_E_USAGE, "the device list names %s twice", d->name);
            dev_instance_close(d);
            return st;
        }
    if (mem_grow((void **)&l->items, cap, l->n + 1, sizeof *l->items)) {
        dev_instance_close(d);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    l->items[l->n++] = *d;
    memset(d, 0, sizeof *d);
    return TDM_OK;
}

/* Opens plugin ps[i] with args into d; the instance takes the library. */
static tdm_status open_plugin(tdm_err *e, loaded *lp, const char *args, dev_instance *d)
{
    tdm_status st = dev_plugin_open(e, lp->p, args, d);
    if (st)
        return st;
    d->plugin = lp->p;
    lp->p = NULL;
    lp->used = 1;
    return TDM_OK;
}

tdm_status dev_list_open(tdm_err *e, const char *spec, const char *const *plugin_paths, size_t n_plugins,
                         dev_list **out)
{
    tdm_status st;
    loaded *ps = NULL;
    size_t nps = 0, cap = 0;
    char *copy = NULL;
    dev_instance d;
    *out = NULL;

    dev_list *l = mem_calloc(1, sizeof *l);
    if (!l)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    if ((st = load_plugins(e, plugin_paths, n_plugins, &ps, &nps)) != TDM_OK)
        goto fail;

    if (!spec || !*spec) {
        for (size_t i = 0; i < nps; i++) {
            if ((st = open_plugin(e, &ps[i], "", &d)) != TDM_OK)
                goto fail;
            if ((st = list_add(e, l, &cap, &d)) != TDM_OK)
                goto fail;
        }
    } else {
        if (!(copy = mem_strdup(spec))) {
            st = err_set(e, TDM_E_NOMEM, "out of memory");
            goto fail;
        }
        int saw_cpu = 0;
        for (char *s = copy; s;) {
            char *comma = strchr(s, ',');
            if (comma)
                *comma = 0;
            while (*s == ' ')
                s++;
            size_t len = strlen(s);
            while (len && s[len - 1] == ' ')
                s[--len] = 0;
            if (!*s) {
                st = err_set(e, TDM_E_USAGE, "the device list '%s' has an empty entry", spec);
                goto fail;
            }
            if (saw_cpu) {
                st = err_set(e, TDM_E_USAGE,
                             "cpu must be last in the device list '%s' (it is the fallback for every node)", spec);
                goto fail;
            }
            char *colon = strchr(s, ':');
            size_t nlen = colon ? (size_t)(colon - s) : len;
            loaded *match = NULL;
            for (size_t i = 0; i < nps && !match; i++) {
                const char *pn = ps[i].probe_name;
                if ((pn && strlen(pn) == nlen && strncmp(pn, s, nlen) == 0) ||
                    (strlen(ps[i].stem) == nlen && strncmp(ps[i].stem, s, nlen) == 0))
                    match = &ps[i];
            }
            if (match && match->used) {
                st = err_set(e, TDM_E_USAGE, "the device list '%s' names plugin %.*s twice", spec, (int)nlen, s);
                goto fail;
            }
            if (match)
                st = open_plugin(e, match, colon ? colon + 1 : "", &d);
            else
                st = dev_open(e, s, &d);
            if (st)
                goto fail;
            saw_cpu = d.kind == DEV_KIND_CPU;
            if ((st = list_add(e, l, &cap, &d)) != TDM_OK)
                goto fail;
            s = comma ? comma + 1 : NULL;
        }
    }
    if (!l->n || l->items[l->n - 1].kind != DEV_KIND_CPU) {
        if ((st = dev_cpu_open(e, &d)) != TDM_OK)
            goto fail;
        if ((st = list_add(e, l, &cap, &d)) != TDM_OK)
            goto fail;
    }
    mem_free(copy);
    free_loaded(ps, nps);
    *out = l;
    return TDM_OK;
fail:
    mem_free(copy);
    dev_list_close(l);
    free_loaded(ps, nps);
    return st;
}

/* ---- listing ---- */

/* strncpy that always terminates (and says so to the compiler). */
static void copy_str(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size)
        n = size - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

static void info_from(dev_info *di, const dev_instance *d, const char *kind, const char *source)
{
    snprintf(di->name, sizeof di->name, "%s", d->name);
    snprintf(di->kind, sizeof di->kind, "%s", kind);
    di->available = 1;
    const char *desc = d->dev.iface->description ? d->dev.iface->description(d->dev.ctx) : "";
    snprintf(di->description, sizeof di->description, "%s", desc ? desc : "");
    di->memory_bytes = d->dev.iface->memory_capacity ? d->dev.iface->memory_capacity(d->dev.ctx) : UINT64_MAX;
    tdm_dtype p = d->ext ? d->ext->precision : TDM_UNDEFINED;
    snprintf(di->precision, sizeof di->precision, "%s",
             p == TDM_FLOAT ? "fp32" : p == TDM_FLOAT16 ? "fp16" : p == TDM_BFLOAT16 ? "bf16" : "");
    snprintf(di->source, sizeof di->source, "%s", source);
}

tdm_status dev_list_known(tdm_err *e, const char *const *plugin_paths, size_t n_plugins, dev_info **out, size_t *n)
{
    tdm_status st;
    char **paths = NULL;
    size_t npaths = 0;
    const char *const *shipped = vnpu_shipped_profiles();
    size_t nshipped = 0;
    dev_instance d;
    *out = NULL;
    *n = 0;
    while (shipped[nshipped])
        nshipped++;
    if ((st = collect_paths(e, plugin_paths, n_plugins, &paths, &npaths)) != TDM_OK)
        return st;
    char why[256] = "";
    ocl_info *ocl = NULL;
    size_t nocl = 0;
    if ((st = ocl_probe(e, &ocl, &nocl, why, sizeof why)) != TDM_OK) {
        free_paths(paths, npaths);
        return st;
    }
    /* cpu, the shipped profiles, the opencl devices (or one unavailable entry), the plugins */
    dev_info *v = mem_calloc(2 + nshipped + nocl + npaths, sizeof *v);
    if (!v) {
        mem_free(ocl);
        free_paths(paths, npaths);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    size_t k = 0;
    tdm_err le;

    err_clear(&le);
    if ((st = dev_cpu_open(e, &d)) != TDM_OK)
        goto fail;
    info_from(&v[k++], &d, "cpu", "builtin");
    dev_instance_close(&d);

    for (size_t i = 0; i < nshipped; i++) {
        dev_info *di = &v[k++];
        err_clear(&le);
        if (vnpu_open(&le, shipped[i], &d) == TDM_OK) {
            info_from(di, &d, "vnpu", "embedded");
            dev_instance_close(&d);
        } else {
            if (le.status == TDM_E_NOMEM) {
                st = err_set(e, TDM_E_NOMEM, "out of memory");
                goto fail;
            }
            snprintf(di->name, sizeof di->name, "vnpu:%s", shipped[i]);
            snprintf(di->kind, sizeof di->kind, "vnpu");
            copy_str(di->why_not, sizeof di->why_not, le.msg);
            snprintf(di->source, sizeof di->source, "embedded");
        }
    }

    /* opencl: every device the ICD loader reports, or why there is none */
    for (size_t i = 0; i < nocl; i++) {
        dev_info *di = &v[k++];
        if (ocl[i].index == 0)
            snprintf(di->name, sizeof di->name, "opencl");
        else
            snprintf(di->name, sizeof di->name, "opencl:%d", ocl[i].index);
        snprintf(di->kind, sizeof di->kind, "opencl");
        di->available = 1;
        snprintf(di->description, sizeof di->description, "%.60s (%.40s, %.60s; %.15s %s)", ocl[i].name,
                 ocl[i].platform, ocl[i].version, ocl[i].type,
                 ocl[i].fp16 ? "device, fp16 (cl_khr_fp16)" : "device, no fp16 (cl_khr_fp16 not reported)");
        di->memory_bytes = ocl[i].memory_bytes;
        snprintf(di->precision, sizeof di->precision, "fp32");
        snprintf(di->source, sizeof di->source, "builtin");
    }
    mem_free(ocl);
    ocl = NULL;
    if (!nocl) {
        dev_info *oc = &v[k++];
        snprintf(oc->name, sizeof oc->name, "opencl");
        snprintf(oc->kind, sizeof oc->kind, "opencl");
        snprintf(oc->description, sizeof oc->description, "an accelerator through OpenCL 1.2");
        snprintf(oc->why_not, sizeof oc->why_not, "opencl is not available: %.200s", why);
        snprintf(oc->source, sizeof oc->source, "builtin");
    }

    for (size_t i = 0; i < npaths; i++) {
        dev_info *di = &v[k++];
        dev_plugin *p = NULL;
        err_clear(&le);
        snprintf(di->kind, sizeof di->kind, "plugin");
        snprintf(di->source, sizeof di->source, "%s", paths[i]);
        if (dev_plugin_load(&le, paths[i], &p) == TDM_OK && dev_plugin_open(&le, p, "", &d) == TDM_OK) {
            info_from(di, &d, "plugin", paths[i]);
            dev_instance_close(&d);
        } else {
            const char *b = strrchr(paths[i], '/');
            snprintf(di->name, sizeof di->name, "%s", p ? dev_plugin_stem(p) : b ? b + 1 : paths[i]);
            copy_str(di->why_not, sizeof di->why_not, le.msg);
        }
        dev_plugin_unload(p);
    }
    free_paths(paths, npaths);
    *out = v;
    *n = k;
    return TDM_OK;
fail:
    mem_free(ocl);
    free_paths(paths, npaths);
    mem_free(v);
    return st;
}
