/* The attribute queries of the node view (ops/node.h). */
#include "ops/node.h"

#include <stdio.h>
#include <string.h>

const gr_attr *gr_attr_find(const gr_node *n, const char *name)
{
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0)
            return &n->attrs[i];
    return NULL;
}

int64_t gr_attr_int(const gr_node *n, const char *name, int64_t dflt)
{
    const gr_attr *a = gr_attr_find(n, name);
    return a && a->type == GA_INT ? a->i : dflt;
}

float gr_attr_float(const gr_node *n, const char *name, float dflt)
{
    const gr_attr *a = gr_attr_find(n, name);
    if (a && a->type == GA_FLOAT)
        return a->f;
    if (a && a->type == GA_INT)
        return (float)a->i;
    return dflt;
}

const char *gr_attr_str(const gr_node *n, const char *name, const char *dflt)
{
    const gr_attr *a = gr_attr_find(n, name);
    return a && a->type == GA_STRING && a->s ? a->s : dflt;
}

int gr_attr_ints(const gr_node *n, const char *name, const int64_t **vals)
{
    const gr_attr *a = gr_attr_find(n, name);
    if (!a || a->type != GA_INTS)
        return -1;
    *vals = a->ints;
    return (int)a->n;
}

int gr_attr_floats(const gr_node *n, const char *name, const float **vals)
{
    const gr_attr *a = gr_attr_find(n, name);
    if (!a || a->type != GA_FLOATS)
        return -1;
    *vals = a->floats;
    return (int)a->n;
}

const char *gr_node_label(const gr_node *n, char *buf, size_t size)
{
    snprintf(buf, size, "'%s' (%s%s%s)", n->name, *n->domain ? n->domain : "", *n->domain ? "." : "", n->op_type);
    return buf;
}
