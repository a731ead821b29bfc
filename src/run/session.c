/* Sessions: a prepared model, the plan it runs with, and the options. */
#include "core/ctx.h"
#include "core/mem.h"
#include "graph/model.h"
#include "run/exec.h"
#include "run/hexec.h"
#include "run/observe.h"
#include "run/adapt.h"
#include "run/bucket.h"
#include "run/admit.h"
#include "run/guard.h"
#include "run/bind.h"
#include "run/rescue_check.h"

#include <cjson/cJSON.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef struct shape_override {
    char *input;
    int rank;
    int64_t dims[TDM_MAX_RANK];
} shape_override;

/* One set of calibration inputs (tdm_session_options_add_calibration_input). */
typedef struct calib_set {
    char **names;             /* NULL entries: the model's only input */
    tdm_tensor **values;
    size_t n;
} calib_set;

struct tdm_session_options {
    int threads;
    shape_override *shapes;
    size_t n_shapes, cap_shapes;
    plan_options po;
    tdm_fusion fusion;        /* tdm_session_options_set_fusion */
    adapt_opts breaker;       /* run-time adaptation (run/adapt.h): breaker, re-planning, plan cache */
    guard_opts guard;         /* the precision guard (run/guard.h) */
    int max_queue;            /* admission (run/admit.h); < 0: ADMIT_DEFAULT_QUEUE */
    calib_set *cal;           /* the guard's calibration input sets */
    size_t n_cal, cap_cal;
    char *bucket_shapes;      /* tdm_session_options_set_buckets; NULL: off */
    char *bucket_pad;
};

struct tdm_session {
    const tdm_model *model;
    tdm_err err;              /* last failure; written under lock */
    pthread_mutex_t lock;
    int threads;
    shape_override *shapes;
    size_t n_shapes;
    tdm_model *own_model;     /* the model reloaded with --shape fixed (NULL: none) */
    tdm_plan *plan;
    exec_prog *prog;
    exec_stats last;          /* figures of the last completed run (under lock) */
    int have_last;
    adapt_state adapt;        /* the circuit breaker (run/adapt.h) */
    guard_state guard;        /* the precision guard (run/guard.h) */
    admit_ctl *admit;         /* admission to the devices' memory (run/admit.h); NULL: none needed */
    bucket_state bucket;      /* shape bucketing (run/bucket.h); its figures under lock */
    tdm_model *bucket_model;  /* the model with the bucket mask (bucket_mask_model); s->model then */
};

tdm_status tdm_session_options_create(tdm_session_options **out)
{
    if (!out)
        return TDM_E_USAGE;
    *out = mem_calloc(1, sizeof **out);
    if (!*out)
        return TDM_E_NOMEM;
    plan_options_init(&(*out)->po);
    (*out)->po.rescue_hooks = &rescue_check_hooks;
    (*out)->fusion = TDM_FUSION_ON;
    (*out)->max_queue = -1;
    guard_opts_init(&(*out)->guard);
    return TDM_OK;
}

void tdm_session_options_destroy(tdm_session_options *opts)
{
    if (!opts)
        return;
    for (size_t i = 0; i < opts->n_shapes; i++)
        mem_free(opts->shapes[i].input);
    mem_free(opts->shapes);
    plan_options_free(&opts->po);
    for (size_t i = 0; i < opts->n_cal; i++) {
        for (size_t k = 0; k < opts->cal[i].n; k++) {
            mem_free(opts->cal[i].names[k]);
            tdm_tensor_destroy(opts->cal[i].values[k]);
        }
        mem_free(opts->cal[i].names);
        mem_free(opts->cal[i].values);
    }
    mem_free(opts->cal);
    mem_free(opts->bucket_shapes);
    mem_free(opts->bucket_pad);
    mem_free(opts);
}

tdm_status tdm_session_options_set_threads(tdm_session_options *opts, int threads)
{
    if (!opts || threads < 0)
        return TDM_E_USAGE;
    opts->threads = threads;
    return TDM_OK;
}

tdm_status tdm_session_options_set_shape(tdm_session_options *opts, const char *input, int rank,
                                         const int64_t *dims)
{
    if (!opts || !input || rank < 0 || rank > TDM_MAX_RANK || (rank && !dims))
        return TDM_E_USAGE;
    if (mem_grow((void **)&opts->shapes, &opts->cap_shapes, opts->n_shapes + 1, sizeof *opts->shapes))
        return TDM_E_NOMEM;
    shape_override *o = &opts->shapes[opts->n_shapes];
    memset(o, 0, sizeof *o);
    if (!(o->input = mem_strdup(input)))
        return TDM_E_NOMEM;
    o->rank = rank;
    for (int i = 0; i < rank; i++)
        o->dims[i] = dims[i];
    opts->n_shapes++;
    return TDM_OK;
}

tdm_status tdm_session_options_set_devices(tdm_session_options *opts, const char *list)
{
    if (!opts)
        return TDM_E_USAGE;
    char *d = NULL;
    if (list && *list && !(d = mem_strdup(list)))
        return TDM_E_NOMEM;
    mem_free(opts->po.devices);
    opts->po.devices = d;
    return TDM_OK;
}

/* The public choices and the planner's and guard's share their numbers. */
_Static_assert((int)TDM_GRANULARITY_OP == (int)PLAN_GRAN_OP && (int)TDM_GRANULARITY_SUBGRAPH == (int)PLAN_GRAN_SUBGRAPH &&
                   (int)TDM_GRANULARITY_GRAPH == (int)PLAN_GRAN_GRAPH && (int)TDM_GRANULARITY_AUTO == (int)PLAN_GRAN_AUTO &&
                   (int)TDM_GRANULARITY_GREEDY == (int)PLAN_GRAN_GREEDY,
               "tdm_granularity and plan_granularity differ");
_Static_assert((int)TDM_FALLBACK_ALLOW == (int)PLAN_FB_ALLOW && (int)TDM_FALLBACK_DENY == (int)PLAN_FB_DENY &&
                   (int)TDM_FALLBACK_DENY_COMPUTE == (int)PLAN_FB_DENY_COMPUTE,
               "tdm_fallback_mode and plan_fallback differ");
_Static_assert((int)TDM_VERIFY_OFF == (int)GUARD_OFF && (int)TDM_VERIFY_FIRST == (int)GUARD_FIRST &&
                   (int)TDM_VERIFY_EVERY == (int)GUARD_EVERY,
               "tdm_verify_mode and the guard's modes differ");

tdm_status tdm_session_options_set_granularity(tdm_session_options *opts, tdm_granularity granularity)
{
    if (!opts || granularity < TDM_GRANULARITY_OP || granularity > TDM_GRANULARITY_GREEDY)
        return TDM_E_USAGE;
    opts->po.granularity = (plan_granularity)granularity;
    return TDM_OK;
}

tdm_status tdm_session_options_set_fallback(tdm_session_options *opts, tdm_fallback_mode mode)
{
    if (!opts || mode < TDM_FALLBACK_ALLOW || mode > TDM_FALLBACK_DENY_COMPUTE)
        return TDM_E_USAGE;
    opts->po.fallback = (plan_fallback)mode;
    opts->po.fallback_set = 1;
    return TDM_OK;
}

tdm_status tdm_session_options_set_max_fallback_ratio(tdm_session_options *opts, double ratio)
{
    if (!opts || ratio != ratio || ratio > 1)
        return TDM_E_USAGE;
    opts->po.max_fallback_ratio = ratio < 0 ? -1 : ratio;
    return TDM_OK;
}

tdm_status tdm_session_options_set_max_boundary_bytes(tdm_session_options *opts, int64_t bytes)
{
    if (!opts)
        return TDM_E_USAGE;
    opts->po.max_boundary_bytes = bytes < 0 ? -1 : bytes;
    return TDM_OK;
}

tdm_status tdm_session_options_set_breaker(tdm_session_options *opts, int faults, double window_ms, double cooldown_ms)
{
    if (!opts || faults < 0 || faults > 1000000 || !(window_ms >= 0) || !(cooldown_ms >= 0))
        return TDM_E_USAGE;
    opts->breaker.faults = faults;
    opts->breaker.window_ms = window_ms;
    opts->breaker.cooldown_ms = cooldown_ms;
    return TDM_OK;
}

tdm_status tdm_session_options_set_adaptation(tdm_session_options *opts, double slow_ratio, int runs, int min_runs)
{
    if (!opts || !(slow_ratio == 0 || (slow_ratio >= 1 && slow_ratio <= 1e6)) || runs < 0 || runs > 1000000 ||
        min_runs < 0 || min_runs > 1000000000)
        return TDM_E_USAGE;
    opts->breaker.slow_ratio = slow_ratio;
    opts->breaker.slow_runs = slow_ratio > 0 && runs == 0 ? 3 : runs;
    opts->breaker.min_runs = min_runs;
    return TDM_OK;
}

tdm_status tdm_session_options_set_plan_cache(tdm_session_options *opts, int size)
{
    if (!opts || size < 0 || size > 4096)
        return TDM_E_USAGE;
    opts->breaker.cache_size = size;
    return TDM_OK;
}

tdm_status tdm_session_options_set_max_queue(tdm_session_options *opts, int max_queue)
{
    if (!opts || max_queue < 0 || max_queue > 1000000)
        return TDM_E_USAGE;
    opts->max_queue = max_queue;
    return TDM_OK;
}

tdm_status tdm_session_adaptation_json(tdm_session *s, char **json)
{
    if (!s || !json)
        return TDM_E_USAGE;
    *json = adapt_json(&s->adapt);
    return *json ? TDM_OK : TDM_E_NOMEM;
}

tdm_status tdm_session_options_set_calibration(tdm_session_options *opts, const char *path)
{
    if (!opts || !path || !*path)
        return TDM_E_USAGE;
    char *c = mem_strdup(path);
    if (!c)
        return TDM_E_NOMEM;
    mem_free(opts->po.calibration);
    opts->po.calibration = c;
    return TDM_OK;
}

tdm_status tdm_session_options_set_precision(tdm_session_options *opts, double min_cosine, double max_abs)
{
    if (!opts || !(min_cosine >= 0 && min_cosine <= 1) || max_abs != max_abs)
        return TDM_E_USAGE;
    opts->po.min_cosine = min_cosine;
    opts->po.max_abs = max_abs < 0 ? -1 : max_abs;
    return TDM_OK;
}

tdm_status tdm_session_options_set_verify(tdm_session_options *opts, tdm_verify_mode mode, int every)
{
    if (!opts || mode < TDM_VERIFY_OFF || mode > TDM_VERIFY_EVERY ||
        (mode == TDM_VERIFY_EVERY ? every < 1 || every > 1000000000 : every != 0))
        return TDM_E_USAGE;
    opts->guard.mode = (int)mode;
    opts->guard.every = every;
    opts->po.rescue_unchecked = mode == TDM_VERIFY_OFF; /* the ledger says so (plan/rescue.h) */
    return TDM_OK;
}

tdm_status tdm_session_options_set_verify_thresholds(tdm_session_options *opts, double output_min_cosine, int rounds)
{
    if (!opts || !(output_min_cosine >= 0 && output_min_cosine <= 1) || rounds < 0 || rounds > 1000)
        return TDM_E_USAGE;
    opts->guard.out_cosine = output_min_cosine;
    opts->guard.rounds = rounds;
    return TDM_OK;
}

tdm_status tdm_session_options_add_calibration_input(tdm_session_options *opts, const char *const *names,
                                                     const tdm_tensor *const *values, size_t n)
{
    if (!opts || !values || n == 0 || n > 1000000)
        return TDM_E_USAGE;
    for (size_t k = 0; k < n; k++)
        if (!values[k])
            return TDM_E_USAGE;
    if (mem_grow((void **)&opts->cal, &opts->cap_cal, opts->n_cal + 1, sizeof *opts->cal))
        return TDM_E_NOMEM;
    calib_set *c = &opts->cal[opts->n_cal];
    memset(c, 0, sizeof *c);
    c->names = mem_calloc(n, sizeof *c->names);
    c->values = mem_calloc(n, sizeof *c->values);
    tdm_status st = c->names && c->values ? TDM_OK : TDM_E_NOMEM;
    for (size_t k = 0; !st && k < n; k++, c->n++) {
        if (names && names[k] && !(c->names[k] = mem_strdup(names[k])))
            st = TDM_E_NOMEM;
        else
            st = tdm_tensor_clone(values[k], &c->values[k]);
    }
    if (!st) {
        opts->n_cal++;
        return TDM_OK;
    }
    for (size_t k = 0; c->names && c->values && k < c->n; k++) {
        mem_free(c->names[k]);
        tdm_tensor_destroy(c->values[k]);
    }
    mem_free(c->names);
    mem_free(c->values);
    return st;
}

tdm_status tdm_session_options_set_rescue(tdm_session_options *opts, tdm_rescue_mode mode)
{
    if (!opts || mode < TDM_RESCUE_OFF || mode > TDM_RESCUE_ALL)
        return TDM_E_USAGE;
    opts->po.rescue = mode == TDM_RESCUE_OFF ? PLAN_RESCUE_OFF : mode == TDM_RESCUE_ALL ? PLAN_RESCUE_ALL : PLAN_RESCUE_SAFE;
    return TDM_OK;
}

tdm_status tdm_session_options_set_buckets(tdm_session_options *opts, const char *shapes, const char *pad)
{
    tdm_err e;
    bucket_shape *b = NULL;
    size_t n = 0;
    if (!opts || (pad && strcmp(pad, "zero") != 0 && strcmp(pad, "edge") != 0) ||
        (shapes && strcmp(shapes, "profile") != 0 && bucket_parse(&e, shapes, &b, &n) != TDM_OK))
        return TDM_E_USAGE;
    mem_free(b);
    char *sc = shapes ? mem_strdup(shapes) : NULL, *pc = pad ? mem_strdup(pad) : NULL;
    if ((shapes && !sc) || (pad && !pc)) {
        mem_free(sc);
        mem_free(pc);
        return TDM_E_NOMEM;
    }
    mem_free(opts->bucket_shapes);
    mem_free(opts->bucket_pad);
    opts->bucket_shapes = sc;
    opts->bucket_pad = pc;
    return TDM_OK;
}

tdm_status tdm_session_options_bind(tdm_session_options *opts, const char *input, const tdm_tensor *value)
{
    if (!opts || !input || !*input || !value)
        return TDM_E_USAGE;
    return plan_options_bind(&opts->po, input, value);
}

tdm_status tdm_session_guard_json(tdm_session *s, char **json)
{
    if (!s || !json)
        return TDM_E_USAGE;
    *json = guard_json(&s->guard);
    return *json ? TDM_OK : TDM_E_NOMEM;
}

tdm_status tdm_session_options_add_pin(tdm_session_options *opts, const char *pin)
{
    if (!opts || !pin)
        return TDM_E_USAGE;
    const char *eq = strrchr(pin, '=');
    if (!eq || eq == pin || !eq[1])
        return TDM_E_USAGE;
    if (mem_grow((void **)&opts->po.pins, &opts->po.cap_pins, opts->po.n_pins + 1, sizeof *opts->po.pins))
        return TDM_E_NOMEM;
    plan_pin *p = &opts->po.pins[opts->po.n_pins];
    p->what = mem_strndup(pin, (size_t)(eq - pin));
    p->device = mem_strdup(eq + 1);
    if (!p->what || !p->device) {
        mem_free(p->what);
        mem_free(p->device);
        return TDM_E_NOMEM;
    }
    opts->po.n_pins++;
    return TDM_OK;
}

tdm_status tdm_session_options_add_plugin(tdm_session_options *opts, const char *path)
{
    if (!opts || !path || !*path)
        return TDM_E_USAGE;
    if (mem_grow((void **)&opts->po.plugins, &opts->po.cap_plugins, opts->po.n_plugins + 1,
                 sizeof *opts->po.plugins))
        return TDM_E_NOMEM;
    if (!(opts->po.plugins[opts->po.n_plugins] = mem_strdup(path)))
        return TDM_E_NOMEM;
    opts->po.n_plugins++;
    return TDM_OK;
}

tdm_status tdm_session_options_set_fusion(tdm_session_options *opts, tdm_fusion fusion)
{
    if (!opts || fusion < TDM_FUSION_OFF || fusion > TDM_FUSION_OBSERVED)
        return TDM_E_USAGE;
    opts->fusion = fusion;
    opts->po.unfused = fusion == TDM_FUSION_OFF; /* the planner prices what runs */
    return TDM_OK;
}

/* The model with the dimensions fixed by opts' shapes, so that the
 * planner sees static shapes (devices may refuse dynamic ones, and sizes
 * and estimates need them): graph/model.h model_specialize, on a clone of
 * the model in memory (the file is not read again). *out is NULL when
 * there is nothing to fix. */
static tdm_status specialize_shapes(tdm_err *e, const tdm_model *model, const shape_override *shapes, size_t n_shapes,
                                   tdm_model **out);

/* Every --shape names an input of the model, with its rank, and agrees
 * with the dimensions the model fixes: one check for sessions and plans. */
static tdm_status shapes_check(tdm_err *e, const tdm_model *model, const shape_override *shapes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const shape_override *o = &shapes[i];
        size_t k;
        for (k = 0; k < model->n_inputs; k++)
            if (strcmp(model->inputs[k].info.name, o->input) == 0)
                break;
        if (k == model->n_inputs)
            return err_set(e, TDM_E_INPUT, "--shape names '%s', which is not an input of the model", o->input);
        const tdm_value_info *vi = &model->inputs[k].info;
        if (vi->rank >= 0 && vi->rank != o->rank)
            return err_set(e, TDM_E_INPUT, "--shape gives input '%s' rank %d, the model declares rank %d", o->input,
                           o->rank, vi->rank);
        for (int d = 0; vi->rank >= 0 && d < o->rank; d++)
            if (o->dims[d] >= 0 && vi->dims[d].value >= 0 && vi->dims[d].value != o->dims[d])
                return err_set(e, TDM_E_INPUT, "--shape gives input '%s' dimension %d = %lld, the model fixes it to %lld",
                               o->input, d, (long long)o->dims[d], (long long)vi->dims[d].value);
    }
    return TDM_OK;
}

static tdm_status specialize(tdm_err *e, const tdm_model *model, const tdm_session_options *opts, tdm_model **out)
{
    *out = NULL;
    if (!opts)
        return TDM_OK;
    tdm_status st = shapes_check(e, model, opts->shapes, opts->n_shapes);
    if (st)
        return st;
    return specialize_shapes(e, model, opts->shapes, opts->n_shapes, out);
}

static tdm_status specialize_shapes(tdm_err *e, const tdm_model *model, const shape_override *shapes, size_t n_shapes,
                                   tdm_model **out)
{
    *out = NULL;
    if (!n_shapes)
        return TDM_OK;
    model_shape *ms = mem_calloc(n_shapes, sizeof *ms);
    if (!ms)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n_shapes; i++)
        ms[i] = (model_shape){shapes[i].input, shapes[i].rank, shapes[i].dims};
    tdm_status st = model_specialize(e, model, ms, n_shapes, out);
    mem_free(ms);
    return st;
}

tdm_status tdm_model_specialize(tdm_ctx *ctx, const tdm_model *model, const tdm_session_options *opts, tdm_model **out)
{
    tdm_err local;
    tdm_err *e = ctx ? &ctx->err : &local;
    if (!out || !model)
        return err_set(e, TDM_E_USAGE, "tdm_model_specialize needs a model and an out pointer");
    err_clear(e);
    return specialize(e, model, opts, out);
}

/* Opens the devices of opts and plans model on them. */
static tdm_status make_plan(tdm_err *e, const tdm_model *model, const tdm_session_options *opts, tdm_plan **out)
{
    plan_options dflt;
    const plan_options *po = opts ? &opts->po : &dflt;
    dev_list *devs = NULL;
    tdm_status st;
    *out = NULL;
    plan_options_init(&dflt);
    dflt.rescue_hooks = &rescue_check_hooks;
    if ((st = bind_check(e, model, po)) != TDM_OK)
        return st;
    st = dev_list_open(e, po->devices, (const char *const *)po->plugins, po->n_plugins, &devs);
    if (st)
        return st;
    return plan_build(e, model, po, devs, out);
}

/* The policy failure as a sentence, then one line per offending node as
 * far as the error buffer goes. */
void session_policy_message(tdm_err *e, const tdm_plan *p)
{
    err_set(e, TDM_E_POLICY, "%s (tdm_plan_violation lists all %zu)", p->policy_error, p->n_violations);
    size_t off = strlen(e->msg);
    for (size_t k = 0; k < p->n_violations && off + 1 < sizeof e->msg; k++) {
        const plan_violation *v = &p->violations[k];
        int w = snprintf(e->msg + off, sizeof e->msg - off, "\n%s: %s: %s",
                         v->node >= 0 ? p->g->nodes[v->node].name : "(graph output)", tdm_reason_str(v->reason),
                         v->detail);
        if (w < 0 || (size_t)w >= sizeof e->msg - off) {
            e->msg[off] = '\0';
            break;
        }
        off += (size_t)w;
    }
}

/* The plan cache's builder (run/adapt.h): the session's model specialized
 * to the shapes of inputs, planned with the session's plan options. */
static tdm_status build_for_inputs(void *user, tdm_err *e, const tdm_tensor *const *inputs, size_t n, tdm_model **model,
                                   tdm_plan **plan)
{
    const tdm_session *s = user;
    const tdm_model *m = s->model;
    shape_override *sh = mem_calloc(n + 1, sizeof *sh);
    size_t k = 0;
    dev_list *devs = NULL;
    tdm_status st;
    *model = NULL;
    *plan = NULL;
    if (!sh)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n && i < m->n_inputs; i++) {
        const tdm_tensor *t = inputs[i];
        if (!t || t->kind != TDM_KIND_TENSOR)
            continue;
        sh[k].input = (char *)m->inputs[i].info.name;
        sh[k].rank = t->rank;
        for (int d = 0; d < t->rank; d++)
            sh[k].dims[d] = t->dims[d];
        k++;
    }
    st = specialize_shapes(e, m, sh, k, model);
    mem_free(sh);
    if (st)
        return st;
    if (!*model)
        return err_set(e, TDM_E_USAGE, "the plan cache needs tensor inputs to specialize the model to");
    const plan_options *po = &s->plan->opts;
    if ((st = dev_list_open(e, po->devices, (const char *const *)po->plugins, po->n_plugins, &devs)) == TDM_OK)
        st = plan_build(e, *model, po, devs, plan);
    if (!st && (*plan)->n_violations) {
        session_policy_message(e, *plan);
        plan_free(*plan);
        *plan = NULL;
        st = TDM_E_POLICY;
    }
    if (st) {
        tdm_model_destroy(*model);
        *model = NULL;
    }
    return st;
}

tdm_status tdm_plan_create(tdm_ctx *ctx, const tdm_model *model, const tdm_session_options *opts, tdm_plan **out)
{
    tdm_err local;
    tdm_err *e = ctx ? &ctx->err : &local;
    if (!out || !model)
        return err_set(e, TDM_E_USAGE, "tdm_plan_create needs a model and an out pointer");
    err_clear(e);
    *out = NULL;
    tdm_model *own = NULL;
    tdm_status st = specialize(e, model, opts, &own);
    if (st)
        return st;
    if ((st = make_plan(e, own ? own : model, opts, out)) != TDM_OK) {
        tdm_model_destroy(own);
        return st;
    }
    (*out)->own_model = own;
    return TDM_OK;
}

void tdm_plan_destroy(tdm_plan *plan) { plan_free(plan); }

static tdm_status session_calibrate(tdm_session *s, tdm_err *e, const tdm_session_options *opts);

/* `--bucket profile`: the image sizes of the first device of the list that
 * has them (dev_ext.image_sizes), as "HxW,HxW" in *out (mem_free it). */
static tdm_status profile_buckets(tdm_err *e, const plan_options *po, char **out)
{
    dev_list *devs = NULL;
    tdm_status st = dev_list_open(e, po->devices, (const char *const *)po->plugins, po->n_plugins, &devs);
    if (st)
        return st;
    *out = NULL;
    for (size_t d = 0; d < devs->n && !*out && !st; d++) {
        const dev_ext *x = devs->items[d].ext;
        if (!x || !x->n_image_sizes)
            continue;
        size_t cap = x->n_image_sizes * 48 + 1, n = 0;
        if (!(*out = mem_alloc(cap))) {
            st = err_set(e, TDM_E_NOMEM, "out of memory");
            break;
        }
        for (size_t k = 0; k < x->n_image_sizes; k++)
            n += (size_t)snprintf(*out + n, cap - n, "%s%lldx%lld", k ? "," : "", (long long)x->image_sizes[k][0],
                                  (long long)x->image_sizes[k][1]);
    }
    if (!st && !*out)
        st = err_set(e, TDM_E_USAGE,
                     "--bucket profile: none of the devices (%s) lists the image sizes it takes (a vnpu profile's "
                     "\"image_sizes\")",
                     po->devices ? po->devices : "the default list");
    dev_list_close(devs);
    return st;
}

tdm_status tdm_session_create(tdm_ctx *ctx, const tdm_model *model, const tdm_session_options *opts,
                              tdm_session **out)
{
    tdm_err local;
    tdm_err *e = ctx ? &ctx->err : &local;
    tdm_status st;
    if (!out || !model)
        return err_set(e, TDM_E_USAGE, "tdm_session_create needs a model and an out pointer");
    *out = NULL;
    err_clear(e);
    tdm_session *s = mem_calloc(1, sizeof *s);
    if (!s)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    if (pthread_mutex_init(&s->lock, NULL)) {
        mem_free(s);
        return err_set(e, TDM_E_NOMEM, "cannot create a mutex");
    }
    s->model = model;
    s->threads = opts && opts->threads ? opts->threads : 1;
    char *from_profile = NULL;
    if (opts && opts->bucket_shapes && strcmp(opts->bucket_shapes, "profile") == 0 &&
        (st = profile_buckets(e, &opts->po, &from_profile)) != TDM_OK) {
        tdm_session_destroy(s);
        return st;
    }
    if (opts && opts->bucket_shapes &&
        ((st = bucket_init(e, &s->bucket, from_profile ? from_profile : opts->bucket_shapes, opts->bucket_pad,
                           model->gm->main)) != TDM_OK ||
         (st = bucket_mask_model(e, model, &s->bucket_model)) != TDM_OK)) {
        mem_free(from_profile);
        tdm_session_destroy(s);
        return st;
    }
    mem_free(from_profile);
    if (s->bucket_model) /* the session plans and runs the masked model */
        s->model = model = s->bucket_model;
    if (s->bucket_model && opts->n_cal) {
        tdm_session_destroy(s);
        return err_set(e, TDM_E_USAGE, "bucketing does not take calibration input sets yet (they would need the "
                                       "padding and the mask): drop them and the precision guard checks the first "
                                       "run");
    }
    if (opts && opts->n_shapes) {
        s->shapes = mem_calloc(opts->n_shapes, sizeof *s->shapes);
        if (!s->shapes) {
            tdm_session_destroy(s);
            return err_set(e, TDM_E_NOMEM, "out of memory");
        }
        if ((st = shapes_check(e, model, opts->shapes, opts->n_shapes)) != TDM_OK) {
            tdm_session_destroy(s);
            return st;
        }
        for (size_t i = 0; i < opts->n_shapes; i++) {
            const shape_override *o = &opts->shapes[i];
            s->shapes[i] = *o;
            s->shapes[i].input = NULL;
            if (!(s->shapes[i].input = mem_strdup(o->input))) {
                tdm_session_destroy(s);
                return err_set(e, TDM_E_NOMEM, "out of memory");
            }
            s->n_shapes = i + 1;
        }
    }
    if ((st = specialize(e, model, opts, &s->own_model)) != TDM_OK ||
        (st = make_plan(e, s->own_model ? s->own_model : model, opts, &s->plan)) != TDM_OK) {
        tdm_session_destroy(s);
        return st;
    }
    if (s->plan->n_violations) {
        session_policy_message(e, s->plan);
        tdm_session_destroy(s);
        return TDM_E_POLICY;
    }
    if ((st = exec_prog_build(e, s->plan, &s->prog)) != TDM_OK ||
        (st = admit_create(e, s->plan, opts ? opts->max_queue : -1, &s->admit)) != TDM_OK) {
        tdm_session_destroy(s);
        return st;
    }
    exec_prog_set_fusion(s->prog, opts ? opts->fusion : TDM_FUSION_ON);
    {
        adapt_opts ao;
        memset(&ao, 0, sizeof ao);
        if (opts)
            ao = opts->breaker;
        if (s->bucket.n && ao.cache_size < (int)s->bucket.n) /* one plan per bucket shape */
            ao.cache_size = (int)s->bucket.n;
        if ((st = adapt_init(e, &s->adapt, &ao, s->plan, s->prog, build_for_inputs, s)) !=
            TDM_OK) {
            tdm_session_destroy(s);
            return st;
        }
        adapt_set_fusion(&s->adapt, opts ? opts->fusion : TDM_FUSION_ON);
    }
    {
        guard_opts go;
        guard_opts_init(&go);
        if ((st = guard_init(e, &s->guard, opts ? &opts->guard : &go, s->plan)) != TDM_OK ||
            (st = session_calibrate(s, e, opts)) != TDM_OK) {
            tdm_session_destroy(s);
            return st;
        }
    }
    *out = s;
    return TDM_OK;
}

void tdm_session_destroy(tdm_session *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_shapes; i++)
        mem_free(s->shapes[i].input);
    mem_free(s->shapes);
    guard_free(&s->guard);
    bucket_free(&s->bucket);
    adapt_free(&s->adapt);
    admit_free(s->admit);
    exec_prog_free(s->prog);
    plan_free(s->plan);
    tdm_model_destroy(s->own_model);
    tdm_model_destroy(s->bucket_model);
    exec_stats_free(&s->last);
    pthread_mutex_destroy(&s->lock);
    mem_free(s);
}

const char *tdm_session_error(const tdm_session *s) { return s ? s->err.msg : ""; }

tdm_status tdm_session_error_copy(const tdm_session *s, char *buf, size_t size)
{
    if (!s || !buf || !size)
        return TDM_E_USAGE;
    pthread_mutex_lock((pthread_mutex_t *)&s->lock);
    snprintf(buf, size, "%s", s->err.msg);
    pthread_mutex_unlock((pthread_mutex_t *)&s->lock);
    return TDM_OK;
}

const tdm_plan *tdm_session_plan(const tdm_session *s)
{
    /* the plan of the last run (re-planning and the plan cache change it) */
    return !s ? NULL : s->adapt.have_lock ? adapt_current_plan((adapt_state *)&s->adapt) : s->plan;
}

tdm_status tdm_session_ledger_json(tdm_session *s, char **json)
{
    if (!s || !json)
        return TDM_E_USAGE;
    char *run = NULL;
    tdm_err e;
    err_clear(&e);
    const tdm_plan *plan = tdm_session_plan(s);
    pthread_mutex_lock(&s->lock);
    if (s->have_last && !(run = exec_stats_json(&s->last, plan))) {
        pthread_mutex_unlock(&s->lock);
        return TDM_E_NOMEM;
    }
    pthread_mutex_unlock(&s->lock);
    /* with run-time adaptation on, its state and decisions too */
    const adapt_opts *ao = &s->adapt.o;
    char *ad = s->adapt.have_lock && (ao->faults > 0 || ao->slow_ratio > 0 || ao->cache_size > 0)
                   ? adapt_json(&s->adapt)
                   : NULL;
    tdm_status st = plan_ledger_json_adapt(&e, plan, run, ad, json);
    mem_free(ad);
    mem_free(run);
    if (!st && s->guard.active) {
        /* the precision guard's decisions with their figures */
        char *gj = guard_json(&s->guard);
        cJSON *root = gj ? cJSON_Parse(*json) : NULL, *gd = gj ? cJSON_Parse(gj) : NULL;
        char *text = NULL;
        if (root && gd && cJSON_AddItemToObject(root, "guard", gd)) {
            gd = NULL;
            text = cJSON_Print(root);
        }
        if (text) {
            char *copy = mem_strdup(text);
            if (copy) {
                mem_free(*json);
                *json = copy;
            }
            cJSON_free(text);
        }
        cJSON_Delete(gd);
        cJSON_Delete(root);
        mem_free(gj);
    }
    if (!st && s->bucket.n) {
        /* shape bucketing: the shapes, the padding and the last padded run */
        pthread_mutex_lock(&s->lock);
        cJSON *bj = bucket_json(&s->bucket);
        pthread_mutex_unlock(&s->lock);
        cJSON *root = bj ? cJSON_Parse(*json) : NULL;
        char *text = NULL;
        if (root && cJSON_AddItemToObject(root, "bucket", bj)) {
            bj = NULL;
            text = cJSON_Print(root);
        }
        char *copy = text ? mem_strdup(text) : NULL;
        if (copy) {
            mem_free(*json);
            *json = copy;
        }
        cJSON_free(text);
        cJSON_Delete(bj);
        cJSON_Delete(root);
    }
    return st;
}

/* Checks a given input against the model's declared type (and --shape). */
static tdm_status check_input(const tdm_session *s, tdm_err *e, const model_io *io, const tdm_tensor *t)
{
    const tdm_value_info *vi = &io->info;
    char got[256], want[256];
    if (!t)
        return TDM_OK;
    if (t->kind != vi->kind && !((vi->optional || vi->kind == TDM_KIND_NONE) && t->kind == TDM_KIND_NONE))
        return err_set(e, TDM_E_INPUT, "input '%s' must be a %s, not a %s", vi->name,
                       vi->kind == TDM_KIND_SEQUENCE ? "sequence" : vi->kind == TDM_KIND_NONE ? "optional" : "tensor",
                       t->kind == TDM_KIND_SEQUENCE ? "sequence" : t->kind == TDM_KIND_NONE ? "none" : "tensor");
    if (t->kind != TDM_KIND_TENSOR)
        return TDM_OK;
    if (vi->dtype != TDM_UNDEFINED && t->dtype != vi->dtype)
        return err_set(e, TDM_E_INPUT, "input '%s' must have element type %s, not %s", vi->name,
                       tdm_dtype_name(vi->dtype), tdm_dtype_name(t->dtype));
    int rank = vi->rank;
    int64_t dims[TDM_MAX_RANK];
    for (int d = 0; d < rank; d++)
        dims[d] = vi->dims[d].value;
    for (size_t i = 0; i < s->n_shapes; i++) {
        if (strcmp(s->shapes[i].input, vi->name) != 0)
            continue;
        rank = s->shapes[i].rank;
        for (int d = 0; d < rank; d++)
            if (s->shapes[i].dims[d] >= 0)
                dims[d] = s->shapes[i].dims[d];
    }
    if (rank < 0)
        return TDM_OK;
    int bad = t->rank != rank;
    for (int d = 0; !bad && d < rank; d++)
        bad = dims[d] >= 0 && dims[d] != t->dims[d];
    if (bad) {
        size_t off = 0;
        want[0] = '\0';
        for (int d = 0; d < rank && off < sizeof want; d++) {
            const char *sym = d < vi->rank ? vi->dims[d].symbol : NULL;
            int n = dims[d] >= 0 ? snprintf(want + off, sizeof want - off, d ? "x%lld" : "%lld", (long long)dims[d])
                                 : snprintf(want + off, sizeof want - off, d ? "x%s" : "%s", sym ? sym : "?");
            if (n < 0)
                break;
            off += (size_t)n;
        }
        if (rank == 0)
            snprintf(want, sizeof want, "scalar");
        return err_set(e, TDM_E_INPUT, "input '%s' has shape %s, the model expects %s", vi->name,
                       shape_str(t->rank, t->dims, got, sizeof got), want);
    }
    return TDM_OK;
}

/* The graph's input list may include initializer-backed inputs that the
 * model API hides: inputs[] (the model's order) mapped onto variant var's
 * graph inputs by value id (mem_alloc; NULL: out of memory). */
static const tdm_tensor **graph_inputs(const tdm_session *s, adapt_variant *var, const tdm_tensor *const *inputs)
{
    const tdm_model *rm =
        adapt_variant_model(var) ? adapt_variant_model(var) : s->own_model ? s->own_model : s->model;
    const gr_graph *g = rm->gm->main;
    const tdm_tensor **gin = mem_calloc((size_t)g->n_inputs + 1, sizeof *gin);
    for (int k = 0; gin && k < g->n_inputs; k++)
        for (size_t j = 0; j < rm->n_inputs; j++)
            if (rm->inputs[j].value == g->inputs[k])
                gin[k] = inputs[j];
    return gin;
}

/* One calibration input set in the model's input order (api[], borrowed
 * from c), checked as a run's inputs are, and of set 0's shapes (ref). */
static tdm_status calib_set_inputs(const tdm_session *s, tdm_err *e, const calib_set *c, size_t which,
                                   const tdm_tensor **api, const tdm_tensor *const *ref)
{
    const tdm_model *m = s->model;
    tdm_status st;
    for (size_t k = 0; k < c->n; k++) {
        size_t j = m->n_inputs;
        if (!c->names[k] && m->n_inputs == 1)
            j = 0;
        else if (!c->names[k])
            return err_set(e, TDM_E_INPUT, "calibration input set %zu has a value without an input name, and the "
                           "model has %zu inputs", which + 1, m->n_inputs);
        for (size_t i = 0; c->names[k] && i < m->n_inputs && j == m->n_inputs; i++)
            if (strcmp(m->inputs[i].info.name, c->names[k]) == 0)
                j = i;
        if (j == m->n_inputs)
            return err_set(e, TDM_E_INPUT, "calibration input set %zu names '%s', which is not an input of the model",
                           which + 1, c->names[k]);
        if (api[j])
            return err_set(e, TDM_E_INPUT, "calibration input set %zu gives input '%s' twice", which + 1,
                           m->inputs[j].info.name);
        api[j] = c->values[k];
    }
    for (size_t j = 0; j < m->n_inputs; j++) {
        const tdm_tensor *t = api[j], *r = ref ? ref[j] : NULL;
        if (!t && !m->inputs[j].info.optional)
            return err_set(e, TDM_E_INPUT, "calibration input set %zu has no value for input '%s'", which + 1,
                           m->inputs[j].info.name);
        if ((st = check_input(s, e, &m->inputs[j], t)) != TDM_OK) {
            char msg[TDM_ERR_MAX];
            snprintf(msg, sizeof msg, "%s", e->msg);
            return err_set(e, st, "calibration input set %zu: %s", which + 1, msg);
        }
        int same = !t || !r || (t->kind == r->kind && t->rank == r->rank);
        for (int d = 0; same && t && r && t->kind == TDM_KIND_TENSOR && d < t->rank; d++)
            same = t->dims[d] == r->dims[d];
        if (!same)
            return err_set(e, TDM_E_INPUT, "calibration input set %zu: input '%s' has another shape than in set 1 "
                           "(every set must have the same shapes)", which + 1, m->inputs[j].info.name);
    }
    return TDM_OK;
}

/* The precision guard's pass over the options' calibration input sets at
 * creation (run/guard.h guard_calibrate). */
static tdm_status session_calibrate(tdm_session *s, tdm_err *e, const tdm_session_options *opts)
{
    size_t n = opts ? opts->n_cal : 0, ni = s->model->n_inputs;
    if (!n)
        return TDM_OK;
    const tdm_tensor **api = mem_calloc(n * (ni + 1), sizeof *api);
    const tdm_tensor *const **sets = mem_calloc(n, sizeof *sets);
    adapt_variant *var = NULL;
    tdm_status st = api && sets ? TDM_OK : err_set(e, TDM_E_NOMEM, "out of memory");
    for (size_t i = 0; !st && i < n; i++)
        st = calib_set_inputs(s, e, &opts->cal[i], i, api + i * (ni + 1), i ? api : NULL);
    /* checked even when the guard is off: a bad set is an error either way */
    if (!st && s->guard.active)
        st = adapt_select(e, &s->adapt, api, ni, &var);
    for (size_t i = 0; !st && var && i < n; i++)
        if (!(sets[i] = graph_inputs(s, var, api + i * (ni + 1))))
            st = err_set(e, TDM_E_NOMEM, "out of memory");
    if (!st && var)
        st = guard_calibrate(e, &s->guard, &s->adapt, var, sets, n, s->threads);
    if (var)
        adapt_release(&s->adapt, var);
    for (size_t i = 0; sets && i < n; i++)
        mem_free((void *)sets[i]);
    mem_free((void *)sets);
    mem_free((void *)api);
    return st;
}

static tdm_status run_plain(tdm_session *s, tdm_err *e, const tdm_tensor *const *inputs, tdm_tensor **outputs,
                            exec_stats *stats);

/* A run through the session's buckets (run/bucket.h): pad, run, crop. */
static tdm_status run_inner(tdm_session *s, tdm_err *e, const tdm_tensor *const *inputs, tdm_tensor **outputs,
                            exec_stats *stats)
{
    const tdm_model *m = s->model;
    if (!s->bucket.n || !m->n_inputs || !inputs || !outputs)
        return run_plain(s, e, inputs, outputs, stats);
    /* the masked model's inputs: the caller's, then "bucket_mask" */
    size_t n_user = s->bucket_model ? m->n_inputs - 1 : m->n_inputs;
    tdm_tensor **padded = mem_calloc(m->n_inputs, sizeof *padded);
    const tdm_tensor **in = mem_calloc(m->n_inputs, sizeof *in);
    bucket_run r;
    tdm_status st = !padded || !in ? err_set(e, TDM_E_NOMEM, "out of memory")
                                   : bucket_inputs(e, &s->bucket, inputs, n_user, padded, &r);
    if (!st && s->bucket_model)
        st = bucket_mask(e, &r, &padded[n_user]);
    if (!st) {
        for (size_t k = 0; k < m->n_inputs; k++)
            in[k] = padded[k] ? padded[k] : inputs[k];
        st = run_plain(s, e, in, outputs, stats);
    }
    if (!st && (st = bucket_outputs(e, &r, outputs, m->n_outputs)) != TDM_OK)
        for (size_t k = 0; k < m->n_outputs; k++) {
            tdm_tensor_destroy(outputs[k]);
            outputs[k] = NULL;
        }
    if (!st) {
        pthread_mutex_lock(&s->lock);
        bucket_note(&s->bucket, &r);
        pthread_mutex_unlock(&s->lock);
    }
    for (size_t k = 0; padded && k < m->n_inputs; k++)
        tdm_tensor_destroy(padded[k]);
    mem_free(padded);
    mem_free((void *)in);
    return st;
}

static tdm_status run_plain(tdm_session *s, tdm_err *e, const tdm_tensor *const *inputs, tdm_tensor **outputs,
                            exec_stats *stats)
{
    const tdm_model *m = s->model;
    if ((m->n_inputs && !inputs) || (m->n_outputs && !outputs))
        return err_set(e, TDM_E_USAGE, "tdm_session_run needs input and output arrays");
    for (size_t k = 0; k < m->n_inputs; k++) {
        tdm_status st = check_input(s, e, &m->inputs[k], inputs[k]);
        if (st)
            return st;
    }
    adapt_variant *var = NULL;
    tdm_status st = adapt_select(e, &s->adapt, inputs, m->n_inputs, &var);
    if (st)
        return st;
    const tdm_tensor **gin = graph_inputs(s, var, inputs);
    if (!gin) {
        adapt_release(&s->adapt, var);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    /* admission to the devices' memory (run/admit.h), then the run */
    admit_ticket ticket;
    tdm_observer_fn ofn;
    void *ouser;
    exec_prog_get_observer(s->prog, &ofn, &ouser);
    st = admit_enter(e, s->admit, adapt_variant_plan(&s->adapt, var), ofn, ouser, &ticket);
    if (!st && guard_due(&s->guard))
        st = guard_run(e, &s->guard, &s->adapt, var, gin, outputs, s->threads, stats);
    else if (!st)
        st = adapt_run(e, &s->adapt, var, gin, outputs, s->threads, stats);
    admit_leave(s->admit, &ticket);
    adapt_release(&s->adapt, var);
    mem_free(gin);
    return st;
}

tdm_status tdm_session_run(tdm_session *s, const tdm_tensor *const *inputs, tdm_tensor **outputs)
{
    if (!s)
        return TDM_E_USAGE;
    tdm_err e;
    exec_stats stats;
    memset(&stats, 0, sizeof stats);
    err_clear(&e);
    /* a bound input the caller omitted gets its value; another is refused */
    const tdm_tensor **bound = NULL;
    tdm_status st = TDM_OK;
    if (s->plan && s->plan->opts.n_binds && inputs)
        bound = bind_inputs(&e, s->model, &s->plan->opts, inputs, &st);
    if (!st)
        st = run_inner(s, &e, bound ? bound : inputs, outputs, &stats);
    mem_free((void *)bound);
    pthread_mutex_lock(&s->lock);
    s->err = e;
    if (!st) {
        exec_stats_free(&s->last);
        s->last = stats;
        s->have_last = 1;
    }
    pthread_mutex_unlock(&s->lock);
    if (st)
        exec_stats_free(&stats);
    return st;
}

tdm_status tdm_session_set_observer(tdm_session *s, tdm_observer_fn fn, void *user)
{
    if (!s || !s->prog)
        return TDM_E_USAGE;
    if (s->adapt.have_lock) /* every program of the session (run/adapt.h) */
        adapt_set_observer(&s->adapt, fn, user);
    else
        exec_prog_set_observer(s->prog, fn, user);
    return TDM_OK;
}
