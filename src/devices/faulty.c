/* Fault injection for tests: a device that wraps another and fails on
 * schedule.
 *
 *   faulty:INNER[?OPTION&OPTION...]      e.g. faulty:vnpu:edge-npu?fail_p=0.1&seed=7
 *
 * INNER is any built-in device entry but cpu (vnpu:PROFILE, opencl[:N]).
 * The wrapper answers supports/estimates/memory as INNER does and forwards
 * every call; node runs (ext->run_host, or iface->run) are counted from 1
 * and fail with TDM_E_DEVICE ("faulty:…: injected fault on call N") when
 *   fail_at=N       the Nth call fails (once)
 *   fail_every=N    every Nth call fails
 *   fail_p=P        each call fails with probability P (0..1), drawn from a
 *                   fixed-seed generator (seed=S, default 1) under a lock,
 *                   so a single-threaded sequence of runs is reproducible
 *   hang_at=N / hang_every=N with hang_ms=T: the call sleeps T ms; when T
 *                   exceeds timeout_ms (default 1000) it then fails as a
 *                   timeout ("did not answer within timeout_ms"), else it
 *                   proceeds normally.
 *   slow=F          (F >= 1, default 1) the device is F times slower than it
 *                   says: run-time adaptation (run/adapt.h) multiplies the
 *                   times it measures for the device's nodes by F
 *                   (the instance's slowdown, dev_slowdown), so that a test can make a
 *                   partition miss its estimate deterministically; the
 *                   estimates stay INNER's.
 * The device's name is the entry without its options ("faulty:vnpu:edge-npu"). */
#define _POSIX_C_SOURCE 200809L
#include "devices/device_internal.h"
#include "core/mem.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct faulty_ctx {
    dev_instance inner;
    char *name;
    dev_ext ext;
    pthread_mutex_t lock;
    uint64_t calls, rng;
    long long fail_at, fail_every, hang_at, hang_every;
    double fail_p, hang_ms, timeout_ms;
    double slow;
} faulty_ctx;

/* 0: proceed; else TDM_E_DEVICE with the sentence in msg */
static tdm_status faulty_tick(faulty_ctx *c, char *msg, size_t size)
{
    pthread_mutex_lock(&c->lock);
    uint64_t n = ++c->calls;
    int fail = (c->fail_at > 0 && n == (uint64_t)c->fail_at) || (c->fail_every > 0 && n % (uint64_t)c->fail_every == 0);
    if (c->fail_p > 0) {
        /* splitmix64 */
        uint64_t z = (c->rng += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        fail |= (double)(z >> 11) / 9007199254740992.0 < c->fail_p;
    }
    int hang = (c->hang_at > 0 && n == (uint64_t)c->hang_at) || (c->hang_every > 0 && n % (uint64_t)c->hang_every == 0);
    pthread_mutex_unlock(&c->lock);
    if (hang && c->hang_ms > 0) {
        double ms = c->hang_ms < c->timeout_ms ? c->hang_ms : c->timeout_ms;
        struct timespec ts = {(time_t)(ms / 1000), (long)((ms - (double)(long long)(ms / 1000) * 1000) * 1e6)};
        nanosleep(&ts, NULL);
        if (c->hang_ms > c->timeout_ms) {
            snprintf(msg, size, "%s did not answer within timeout_ms %g (call %llu hangs for %g ms)", c->name,
                     c->timeout_ms, (unsigned long long)n, c->hang_ms);
            return TDM_E_DEVICE;
        }
    }
    if (fail) {
        snprintf(msg, size, "%s: injected fault on call %llu", c->name, (unsigned long long)n);
        return TDM_E_DEVICE;
    }
    return TDM_OK;
}

static tdm_status faulty_run_host(void *ctx, op_ctx *op)
{
    faulty_ctx *c = ctx;
    char msg[256];
    if (faulty_tick(c, msg, sizeof msg))
        return err_set(op->err, TDM_E_DEVICE, "%s", msg);
    return c->inner.ext->run_host(c->inner.dev.ctx, op);
}

static tdm_status faulty_reserve(void *ctx, size_t bytes, tdm_err *e)
{
    faulty_ctx *c = ctx;
    return c->inner.ext->reserve ? c->inner.ext->reserve(c->inner.dev.ctx, bytes, e) : TDM_OK;
}

static void faulty_release(void *ctx, size_t bytes)
{
    faulty_ctx *c = ctx;
    if (c->inner.ext->release)
        c->inner.ext->release(c->inner.dev.ctx, bytes);
}

#define INNER(c) ((c)->inner.dev.iface)
#define ICTX(c) ((c)->inner.dev.ctx)

static const char *f_name(void *ctx) { return ((faulty_ctx *)ctx)->name; }
static const char *f_description(void *ctx)
{
    faulty_ctx *c = ctx;
    return INNER(c)->description ? INNER(c)->description(ICTX(c)) : "";
}
static tdm_reason f_supports(void *ctx, const tdm_node_desc *n, tdm_verdict *v)
{
    faulty_ctx *c = ctx;
    return INNER(c)->supports(ICTX(c), n, v);
}
static uint64_t f_capacity(void *ctx)
{
    faulty_ctx *c = ctx;
    return INNER(c)->memory_capacity ? INNER(c)->memory_capacity(ICTX(c)) : 0;
}
static tdm_status f_alloc(void *ctx, size_t bytes, void **buf)
{
    faulty_ctx *c = ctx;
    return INNER(c)->buffer_alloc(ICTX(c), bytes, buf);
}
static void f_free(void *ctx, void *buf)
{
    faulty_ctx *c = ctx;
    INNER(c)->buffer_free(ICTX(c), buf);
}
static tdm_status f_to_dev(void *ctx, void *dst, const void *src, size_t bytes)
{
    faulty_ctx *c = ctx;
    return INNER(c)->copy_to_device(ICTX(c), dst, src, bytes);
}
static tdm_status f_to_host(void *ctx, void *dst, const void *src, size_t bytes)
{
    faulty_ctx *c = ctx;
    return INNER(c)->copy_to_host(ICTX(c), dst, src, bytes);
}
static tdm_status f_run(void *ctx, const tdm_node_desc *node, const tdm_device_tensor *in, tdm_device_tensor *out,
                        char *err, size_t err_size)
{
    faulty_ctx *c = ctx;
    tdm_status st = faulty_tick(c, err, err_size);
    if (st)
        return st;
    return INNER(c)->run(ICTX(c), node, in, out, err, err_size);
}
static double f_estimate(void *ctx, const tdm_node_desc *n, int *modeled)
{
    faulty_ctx *c = ctx;
    return INNER(c)->estimate_ms ? INNER(c)->estimate_ms(ICTX(c), n, modeled) : -1;
}
static double f_copy_ms(void *ctx, size_t bytes, int to_device, int *modeled)
{
    faulty_ctx *c = ctx;
    return INNER(c)->copy_ms ? INNER(c)->copy_ms(ICTX(c), bytes, to_device, modeled) : 0;
}
static const tdm_device_fallback *f_take(void *ctx, size_t *n)
{
    faulty_ctx *c = ctx;
    if (INNER(c)->take_fallbacks)
        return INNER(c)->take_fallbacks(ICTX(c), n);
    *n = 0;
    return NULL;
}
static void f_destroy(void *ctx)
{
    faulty_ctx *c = ctx;
    if (!c)
        return;
    dev_instance_close(&c->inner);
    pthread_mutex_destroy(&c->lock);
    mem_free(c->name);
    mem_free(c);
}

static const tdm_device_iface faulty_iface = {
    TDM_DEVICE_API_VERSION, f_name, f_description, f_supports, f_capacity, f_alloc, f_free, f_to_dev, f_to_host,
    f_run, f_estimate, f_copy_ms, f_take, f_destroy,
    NULL /* last_run_ms: none, its node times are wall times */, NULL, NULL /* rewrite: none */};

static int opt_num(const char *val, double lo, double hi, double *out)
{
    char *end = NULL;
    double d = strtod(val, &end);
    if (!*val || (*end && *end != '&') || !(d >= lo && d <= hi))
        return -1;
    *out = d;
    return 0;
}

tdm_status dev_faulty_open(tdm_err *e, const char *args, dev_instance *out)
{
    memset(out, 0, sizeof *out);
    if (!args || !*args)
        return err_set(e, TDM_E_USAGE, "faulty needs the device it wraps: faulty:vnpu:edge-npu?fail_p=0.1");
    faulty_ctx *c = mem_calloc(1, sizeof *c);
    if (!c)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    c->timeout_ms = 1000;
    c->slow = 1;
    c->rng = 1;
    const char *q = strchr(args, '?');
    size_t ilen = q ? (size_t)(q - args) : strlen(args);
    char *inner = mem_alloc(ilen + 1);
    c->name = mem_alloc(ilen + 8);
    if (!inner || !c->name) {
        mem_free(inner);
        mem_free(c->name);
        mem_free(c);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    memcpy(inner, args, ilen);
    inner[ilen] = '\0';
    snprintf(c->name, ilen + 8, "faulty:%s", inner);
    tdm_status st = TDM_OK;
    for (const char *o = q ? q + 1 : NULL; o && *o;) {
        const char *eq = strchr(o, '='), *amp = strchr(o, '&');
        double d = 0;
        if (!eq || (amp && amp < eq)) {
            st = err_set(e, TDM_E_USAGE, "faulty: option '%.*s' needs a value (NAME=VALUE)",
                         (int)(amp ? (size_t)(amp - o) : strlen(o)), o);
            break;
        }
        size_t nl = (size_t)(eq - o);
#define IS(s) (nl == strlen(s) && strncmp(o, s, nl) == 0)
        int bad;
        if (IS("fail_p"))
            bad = opt_num(eq + 1, 0, 1, &c->fail_p);
        else if (IS("hang_ms"))
            bad = opt_num(eq + 1, 0, 3.6e6, &c->hang_ms);
        else if (IS("timeout_ms"))
            bad = opt_num(eq + 1, 0, 3.6e6, &c->timeout_ms);
        else if (IS("slow"))
            bad = opt_num(eq + 1, 1, 1e6, &c->slow);
        else if (IS("fail_at") || IS("fail_every") || IS("hang_at") || IS("hang_every") || IS("seed")) {
            bad = opt_num(eq + 1, 0, 9e15, &d);
            long long v = (long long)d;
            if (IS("fail_at"))
                c->fail_at = v;
            else if (IS("fail_every"))
                c->fail_every = v;
            else if (IS("hang_at"))
                c->hang_at = v;
            else if (IS("hang_every"))
                c->hang_every = v;
            else
                c->rng = (uint64_t)v;
        } else {
            st = err_set(e, TDM_E_USAGE,
                         "faulty: unknown option '%.*s' (fail_at, fail_every, fail_p, seed, hang_at, hang_every, "
                         "hang_ms, timeout_ms, slow)",
                         (int)nl, o);
            break;
        }
#undef IS
        if (bad) {
            st = err_set(e, TDM_E_USAGE, "faulty: the value of '%.*s' is out of range",
                         (int)(amp ? (size_t)(amp - o) : strlen(o)), o);
            break;
        }
        o = amp ? amp + 1 : NULL;
    }
    if (!st && strncmp(inner, "cpu", 3) == 0 && (inner[3] == '\0' || inner[3] == ':'))
        st = err_set(e, TDM_E_USAGE, "faulty cannot wrap cpu, the fallback of every node");
    if (!st && strncmp(inner, "faulty", 6) == 0)
        st = err_set(e, TDM_E_USAGE, "faulty cannot wrap itself");
    if (!st)
        st = dev_open(e, inner, &c->inner);
    mem_free(inner);
    if (st) {
        mem_free(c->name);
        mem_free(c);
        return st;
    }
    pthread_mutex_init(&c->lock, NULL);
    if (c->inner.ext) {
        c->ext = *c->inner.ext;
        c->ext.run_host = faulty_run_host;
        c->ext.reserve = faulty_reserve;
        c->ext.release = faulty_release;
        out->ext = &c->ext;
    }
    out->dev.iface = &faulty_iface;
    out->dev.ctx = c;
    out->kind = c->inner.kind;
    out->slowdown = c->slow >= 1 ? c->slow : 1;
    if (!(out->name = mem_strdup(c->name))) {
        f_destroy(c);
        memset(out, 0, sizeof *out);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    return TDM_OK;
}
