#include "core/strmap.h"
#include "core/mem.h"

#include <stdint.h>
#include <string.h>

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

void strmap_init(strmap *m) { memset(m, 0, sizeof *m); }

void strmap_free(strmap *m)
{
    mem_free(m->keys);
    mem_free(m->vals);
    strmap_init(m);
}

static int rehash(strmap *m, size_t ncap)
{
    const char **keys = mem_calloc(ncap, sizeof *keys);
    int *vals = mem_calloc(ncap, sizeof *vals);
    if (!keys || !vals) {
        mem_free(keys);
        mem_free(vals);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        size_t j = hash(m->keys[i]) & (ncap - 1);
        while (keys[j])
            j = (j + 1) & (ncap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    mem_free(m->keys);
    mem_free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = ncap;
    return 0;
}

int strmap_put(strmap *m, const char *key, int val)
{
    if ((m->len + 1) * 2 > m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 16;
        if (ncap < m->cap || rehash(m, ncap))
            return -1;
    }
    size_t j = hash(key) & (m->cap - 1);
    while (m->keys[j]) {
        if (strcmp(m->keys[j], key) == 0) {
            m->vals[j] = val;
            return 0;
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->keys[j] = key;
    m->vals[j] = val;
    m->len++;
    return 0;
}

int strmap_get(const strmap *m, const char *key)
{
    if (!m->cap)
        return -1;
    size_t j = hash(key) & (m->cap - 1);
    while (m->keys[j]) {
        if (strcmp(m->keys[j], key) == 0)
            return m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}
