/* gr_finalize and gr_validate: op resolution, outer-scope values, consumer
 * counts, then the structural checks and the topological order.
 *
 * Everything that walks nodes is iterative (graphs can have 100k nodes);
 * only the nesting of subgraphs recurses, and the loader bounds it. */
#include "graph/analysis.h"
#include "core/mem.h"
#include "ops/op.h"

#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- helpers */

int gr_value_defined(const gr_graph *g, int v)
{
    const gr_value *x = &g->values[v];
    return x->producer >= 0 || x->is_input || x->init != NULL;
}

const gr_graph *gr_outer_lookup(const gr_graph *g, const char *name, int *id)
{
    for (const gr_graph *p = g->parent; p; p = p->parent) {
        int k = gr_value_find(p, name);
        if (k >= 0 && gr_value_defined(p, k)) {
            *id = k;
            return p;
        }
    }
    *id = -1;
    return NULL;
}

int gr_node_has_subgraphs(const gr_node *n)
{
    for (int a = 0; a < n->n_attrs; a++)
        if ((n->attrs[a].type == GA_GRAPH && n->attrs[a].g) || (n->attrs[a].type == GA_GRAPHS && n->attrs[a].n))
            return 1;
    return 0;
}

tdm_status gr_each_subgraph(tdm_err *e, gr_node *n, tdm_status (*fn)(tdm_err *, gr_graph *))
{
    char label[256];
    for (int a = 0; a < n->n_attrs; a++) {
        gr_attr *at = &n->attrs[a];
        size_t cnt = at->type == GA_GRAPH ? (at->g ? 1 : 0) : at->type == GA_GRAPHS ? at->n : 0;
        for (size_t k = 0; k < cnt; k++) {
            gr_graph *sub = at->type == GA_GRAPH ? at->g : at->graphs[k];
            if (!sub)
                continue;
            tdm_status st = fn(e, sub);
            if (st) {
                err_prefix(e, "subgraph '%s' of node %s: ", sub->name ? sub->name : at->name,
                           gr_node_label(n, label, sizeof label));
                return st;
            }
        }
    }
    return TDM_OK;
}

static int ids_push(gr_ids *l, int v)
{
    if (mem_grow((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v))
        return -1;
    l->v[l->n++] = v;
    return 0;
}

/* Outer-scope reads of sub (and of its subgraphs) that resolve to target. */
static int collect_implicit(const gr_graph *target, const gr_graph *sub, gr_ids *out)
{
    for (int v = 0; v < sub->n_values; v++) {
        if (!sub->values[v].outer)
            continue;
        int id;
        if (gr_outer_lookup(sub, sub->values[v].name, &id) == target && ids_push(out, id))
            return -1;
    }
    for (int i = 0; i < sub->n_nodes; i++) {
        const gr_node *n = &sub->nodes[i];
        for (int a = 0; a < n->n_attrs; a++) {
            const gr_attr *at = &n->attrs[a];
            if (at->type == GA_GRAPH && at->g && collect_implicit(target, at->g, out))
                return -1;
            for (size_t k = 0; at->type == GA_GRAPHS && k < at->n; k++)
                if (at->graphs[k] && collect_implicit(target, at->graphs[k], out))
                    return -1;
        }
    }
    return 0;
}

int gr_node_implicit(const gr_graph *g, const gr_node *n, gr_ids *out)
{
    for (int a = 0; a < n->n_attrs; a++) {
        const gr_attr *at = &n->attrs[a];
        if (at->type == GA_GRAPH && at->g && collect_implicit(g, at->g, out))
            return -1;
        for (size_t k = 0; at->type == GA_GRAPHS && k < at->n; k++)
            if (at->graphs[k] && collect_implicit(g, at->graphs[k], out))
                return -1;
    }
    return 0;
}

static void set_producers(gr_graph *g)
{
    for (int v = 0; v < g->n_values; v++)
        g->values[v].producer = -1;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i].n_outputs; j++) {
            int v = g->nodes[i].outputs[j];
            if (v >= 0 && g->values[v].producer < 0)
                g->values[v].producer = i;
        }
}

tdm_status gr_count_uses(tdm_err *e, gr_graph *g)
{
    gr_ids imp = {NULL, 0, 0};
    set_producers(g);
    for (int v = 0; v < g->n_values; v++)
        g->values[v].n_consumers = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const gr_node *n = &g->nodes[i];
        for (int j = 0; j < n->n_inputs; j++)
            if (n->inputs[j] >= 0)
                g->values[n->inputs[j]].n_consumers++;
        if (!gr_node_has_subgraphs(n))
            continue;
        imp.n = 0;
        if (gr_node_implicit(g, n, &imp)) {
            mem_free(imp.v);
            return err_set(e, TDM_E_NOMEM, "out of memory");
        }
        for (size_t k = 0; k < imp.n; k++)
            g->values[imp.v[k]].n_consumers++;
    }
    mem_free(imp.v);
    return TDM_OK;
}

/* --------------------------------------------------------------- finalize */

static tdm_status finalize_graph(tdm_err *e, gr_graph *g)
{
    char label[256];
    tdm_status st;
    gr_model *m = g->model;

    set_producers(g);
    /* Outer: read here (by a node or as an output) but defined nowhere here.
     * A name only declared (value_info) and never read is not. */
    for (int v = 0; v < g->n_values; v++)
        g->values[v].outer = 0;
    if (g->parent) {
        for (int i = 0; i < g->n_nodes; i++)
            for (int j = 0; j < g->nodes[i].n_inputs; j++)
                if (g->nodes[i].inputs[j] >= 0)
                    g->values[g->nodes[i].inputs[j]].outer = 1;
        for (int k = 0; k < g->n_outputs; k++)
            if (g->outputs[k] >= 0)
                g->values[g->outputs[k]].outer = 1;
        for (int v = 0; v < g->n_values; v++) {
            gr_value *x = &g->values[v];
            x->outer = x->outer && x->producer < 0 && !x->is_input && !x->init && !x->is_initializer;
        }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        gr_node *n = &g->nodes[i];
        int64_t opset = gr_opset_version(m, n->domain);
        if (opset < 0)
            return err_set(e, TDM_E_MODEL, "node %s: the model imports no opset for domain %s",
                           gr_node_label(n, label, sizeof label), *n->domain ? n->domain : "ai.onnx");
        n->opset = opset;
        st = op_resolve(e, n->domain, n->op_type, opset, &n->op, &n->version);
        if (st) {
            err_prefix(e, "node %s: ", gr_node_label(n, label, sizeof label));
            return st;
        }
    }
    for (int i = 0; i < g->n_nodes; i++)
        if ((st = gr_each_subgraph(e, &g->nodes[i], finalize_graph)) != TDM_OK)
            return st;
    return gr_count_uses(e, g);
}

tdm_status gr_finalize(tdm_err *e, gr_model *m)
{
    if (!m || !m->main)
        return err_set(e, TDM_E_MODEL, "the model has no graph");
    return finalize_graph(e, m->main);
}

/* --------------------------------------------------------------- validate */

/* Min-heap of node indices: Kahn's algorithm takes the ready node that comes
 * first in the file, so a file already in order keeps its order. */
static void heap_push(int *h, int *n, int x)
{
    int i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > x) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

static int heap_pop(int *h, int *n)
{
    int top = h[0], x = h[--(*n)], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1] < h[c])
            c++;
        if (h[c] >= x)
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = x;
    return top;
}

/* The dependencies of node i: its input slots, then its implicit inputs. */
typedef struct deps {
    const gr_graph *g;
    const int *imp;          /* implicit value ids of all nodes */
    const size_t *imp_start; /* node i's are imp[imp_start[i] .. imp_start[i+1]) */
} deps;

static size_t dep_count(const deps *d, int i)
{
    return (size_t)d->g->nodes[i].n_inputs + (d->imp_start[i + 1] - d->imp_start[i]);
}

static int dep_value(const deps *d, int i, size_t k)
{
    const gr_node *n = &d->g->nodes[i];
    if (k < (size_t)n->n_inputs)
        return n->inputs[k];
    return d->imp[d->imp_start[i] + k - (size_t)n->n_inputs];
}

/* Names a node on a cycle among the nodes Kahn's algorithm left (indeg > 0). */
static tdm_status report_cycle(tdm_err *e, const gr_graph *g, const deps *d, const int *indeg, int *pred,
                               int start)
{
    char label[256], path[512];
    int N = g->n_nodes, cur = start;
    for (int i = 0; i < N; i++)
        pred[i] = -2;
    /* Walk to an unfinished predecessor until a node repeats: it is on a cycle. */
    while (pred[cur] == -2) {
        int p = -1;
        for (size_t k = 0; k < dep_count(d, cur) && p < 0; k++) {
            int v = dep_value(d, cur, k);
            int q = v >= 0 ? g->values[v].producer : -1;
            if (q >= 0 && indeg[q] > 0)
                p = q;
        }
        pred[cur] = p;
        if (p < 0)
            break; /* cannot happen: a node left over has an unfinished predecessor */
        cur = p;
    }
    /* cur is on the cycle; list it in data-flow order (pred[x] feeds x). */
    int cyc[8], nc = 0, x = cur;
    do {
        cyc[nc++] = x;
        x = pred[x];
    } while (x >= 0 && x != cur && nc < 8);
    /* Whole: cur -> cyc[nc-1] -> ... -> cyc[1] -> cur. Else the cycle is
     * longer than cyc[]: ... -> cyc[nc-1] -> ... -> cur. */
    int whole = x == cur;
    size_t off = 0;
    path[0] = '\0';
    if (!whole)
        off = (size_t)snprintf(path, sizeof path, "...");
    for (int k = whole ? nc : nc - 1; k >= 0 && off < sizeof path; k--) {
        int node = cyc[k == nc ? 0 : k];
        int w = snprintf(path + off, sizeof path - off, "%s'%s'", off ? " -> " : "", g->nodes[node].name);
        if (w < 0)
            break;
        off += (size_t)w;
    }
    return err_set(e, TDM_E_MODEL, "node %s is on a cycle: %s", gr_node_label(&g->nodes[cur], label, sizeof label),
                   path);
}

static tdm_status validate_graph(tdm_err *e, gr_graph *g)
{
    char label[256], label2[256];
    tdm_status st = TDM_OK;
    int N = g->n_nodes, V = g->n_values;
    const char *where = g->parent ? ", here or in an enclosing graph" : "";
    unsigned char *seen = NULL;
    size_t *imp_start = NULL, *offs = NULL;
    int *indeg = NULL, *cons = NULL, *heap = NULL, *order = NULL;
    gr_ids imp = {NULL, 0, 0};

    /* Producers, duplicates, unknown ops. */
    for (int v = 0; v < V; v++)
        g->values[v].producer = -1;
    for (int i = 0; i < N; i++) {
        gr_node *n = &g->nodes[i];
        if (n->op < 0) {
            int op, ver;
            st = op_resolve(e, n->domain, n->op_type, gr_opset_version(g->model, n->domain), &op, &ver);
            if (!st)
                st = err_set(e, TDM_E_INTERNAL, "operator %s was not resolved (gr_finalize must run first)",
                             n->op_type);
            err_prefix(e, "node %s: ", gr_node_label(n, label, sizeof label));
            return st;
        }
        for (int j = 0; j < n->n_outputs; j++) {
            int v = n->outputs[j];
            if (v < 0)
                continue;
            gr_value *x = &g->values[v];
            if (x->producer == i)
                return err_set(e, TDM_E_MODEL, "node %s lists output '%s' twice",
                               gr_node_label(n, label, sizeof label), x->name);
            if (x->producer >= 0)
                return err_set(e, TDM_E_MODEL, "value '%s' is produced by two nodes: %s and %s", x->name,
                               gr_node_label(&g->nodes[x->producer], label2, sizeof label2),
                               gr_node_label(n, label, sizeof label));
            if (x->is_input)
                return err_set(e, TDM_E_MODEL, "value '%s' is produced by node %s but is also a graph input",
                               x->name, gr_node_label(n, label, sizeof label));
            if (x->is_initializer)
                return err_set(e, TDM_E_MODEL, "value '%s' is produced by node %s but is also an initializer",
                               x->name, gr_node_label(n, label, sizeof label));
            x->producer = i;
        }
    }
    if (!(seen = mem_calloc((size_t)V + 1, 1))) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int k = 0; k < g->n_inputs; k++) {
        int v = g->inputs[k];
        if (v < 0 || v >= V) {
            st = err_set(e, TDM_E_INTERNAL, "graph input %d has no value", k);
            goto done;
        }
        if (seen[v]) {
            st = err_set(e, TDM_E_MODEL, "graph input '%s' is listed twice", g->values[v].name);
            goto done;
        }
        seen[v] = 1;
    }

    /* Undefined reads and outputs. */
    for (int i = 0; i < N; i++) {
        const gr_node *n = &g->nodes[i];
        for (int j = 0; j < n->n_inputs; j++) {
            int v = n->inputs[j], id;
            if (v < 0 || gr_value_defined(g, v))
                continue;
            if (g->parent && gr_outer_lookup(g, g->values[v].name, &id)) {
                g->values[v].outer = 1;
                continue;
            }
            st = err_set(e, TDM_E_MODEL,
                         "node %s reads '%s', which no node produces and which is not a graph input or "
                         "initializer%s",
                         gr_node_label(n, label, sizeof label), g->values[v].name, where);
            goto done;
        }
    }
    for (int k = 0; k < g->n_outputs; k++) {
        int v = g->outputs[k], id;
        if (v < 0 || v >= V) {
            st = err_set(e, TDM_E_INTERNAL, "graph output %d has no value", k);
            goto done;
        }
        if (gr_value_defined(g, v) || (g->parent && gr_outer_lookup(g, g->values[v].name, &id)))
            continue;
        st = err_set(e, TDM_E_MODEL, "graph output '%s' is never produced", g->values[v].name);
        goto done;
    }

    /* Edges: input slots and implicit (subgraph) reads whose producer is a node here. */
    imp_start = mem_calloc((size_t)N + 1, sizeof *imp_start);
    indeg = mem_calloc((size_t)N + 1, sizeof *indeg);
    offs = mem_calloc((size_t)V + 1, sizeof *offs);
    heap = mem_calloc((size_t)N + 1, sizeof *heap);
    order = mem_calloc((size_t)N + 1, sizeof *order);
    if (!imp_start || !indeg || !offs || !heap || !order) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < N; i++) {
        imp_start[i] = imp.n;
        if (gr_node_has_subgraphs(&g->nodes[i]) && gr_node_implicit(g, &g->nodes[i], &imp)) {
            st = err_set(e, TDM_E_NOMEM, "out of memory");
            goto done;
        }
    }
    imp_start[N] = imp.n;
    deps d = {g, imp.v, imp_start};
    size_t n_edges = 0;
    for (int i = 0; i < N; i++)
        for (size_t k = 0; k < dep_count(&d, i); k++) {
            int v = dep_value(&d, i, k);
            if (v >= 0 && g->values[v].producer >= 0) {
                indeg[i]++;
                offs[v]++;
                n_edges++;
            }
        }
    /* offs[v] becomes the end of v's consumer run, then its start as we fill. */
    size_t acc = 0;
    for (int v = 0; v < V; v++) {
        acc += offs[v];
        offs[v] = acc;
    }
    offs[V] = n_edges;
    if (!(cons = mem_calloc(n_edges + 1, sizeof *cons))) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int i = N - 1; i >= 0; i--)
        for (size_t k = dep_count(&d, i); k-- > 0;) {
            int v = dep_value(&d, i, k);
            if (v >= 0 && g->values[v].producer >= 0)
                cons[--offs[v]] = i;
        }

    int nh = 0, no = 0;
    for (int i = 0; i < N; i++)
        if (indeg[i] == 0)
            heap_push(heap, &nh, i);
    while (nh > 0) {
        int i = heap_pop(heap, &nh);
        order[no++] = i;
        const gr_node *n = &g->nodes[i];
        for (int j = 0; j < n->n_outputs; j++) {
            int v = n->outputs[j];
            if (v < 0)
                continue;
            for (size_t k = offs[v]; k < offs[v + 1]; k++)
                if (--indeg[cons[k]] == 0)
                    heap_push(heap, &nh, cons[k]);
        }
    }
    if (no < N) {
        for (int i = 0; i < N; i++)
            if (indeg[i] > 0) {
                st = report_cycle(e, g, &d, indeg, heap, i);
                goto done;
            }
        st = err_set(e, TDM_E_INTERNAL, "topological order lost nodes");
        goto done;
    }
    mem_free(g->order);
    g->order = order;
    order = NULL;

    for (int i = 0; i < N; i++)
        if ((st = gr_each_subgraph(e, &g->nodes[i], validate_graph)) != TDM_OK)
            goto done;
done:
    mem_free(seen);
    mem_free(imp_start);
    mem_free(indeg);
    mem_free(offs);
    mem_free(cons);
    mem_free(heap);
    mem_free(order);
    mem_free(imp.v);
    return st;
}

tdm_status gr_validate(tdm_err *e, gr_graph *g)
{
    if (!g)
        return err_set(e, TDM_E_MODEL, "the model has no graph");
    return validate_graph(e, g);
}
