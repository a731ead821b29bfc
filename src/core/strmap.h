/* A string → int map (open addressing). Keys are borrowed: they must outlive
 * the map. */
#ifndef TDM_CORE_STRMAP_H
#define TDM_CORE_STRMAP_H

#include <stddef.h>

typedef struct strmap {
    const char **keys;
    int *vals;
    size_t cap, len;
} strmap;

void strmap_init(strmap *m);
void strmap_free(strmap *m);
/* Inserts or replaces; returns 0, or -1 when out of memory. */
int strmap_put(strmap *m, const char *key, int val);
/* The value, or -1 when absent. */
int strmap_get(const strmap *m, const char *key);

#endif
