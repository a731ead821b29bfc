#include "core/mem.h"

#include <stdlib.h>
#include <string.h>

static long fail_countdown;

void mem_fail_after(long n) { fail_countdown = n; }

static int should_fail(void)
{
    if (fail_countdown <= 0)
        return 0;
    return --fail_countdown == 0;
}

void *mem_alloc(size_t size)
{
    if (should_fail())
        return NULL;
    return malloc(size ? size : 1);
}

void *mem_calloc(size_t n, size_t size)
{
    size_t total;
    if (mem_mul(n, size, &total) || should_fail())
        return NULL;
    return calloc(total ? total : 1, 1);
}

void *mem_realloc(void *p, size_t size)
{
    if (should_fail())
        return NULL;
    return realloc(p, size ? size : 1);
}

void mem_free(void *p) { free(p); }

char *mem_strndup(const char *s, size_t n)
{
    char *d = mem_alloc(n + 1);
    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *mem_strdup(const char *s) { return s ? mem_strndup(s, strlen(s)) : NULL; }

int mem_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 8;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2)
            return -1;
        ncap *= 2;
    }
    size_t bytes;
    if (mem_mul(ncap, elem, &bytes))
        return -1;
    void *p = mem_realloc(*arr, bytes);
    if (!p)
        return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

int mem_mul(size_t a, size_t b, size_t *out)
{
    if (a && b > SIZE_MAX / a)
        return -1;
    *out = a * b;
    return 0;
}

int mem_add(size_t a, size_t b, size_t *out)
{
    if (b > SIZE_MAX - a)
        return -1;
    *out = a + b;
    return 0;
}

int mem_mul_i64(int64_t a, int64_t b, int64_t *out)
{
    if (a < 0 || b < 0)
        return -1;
    if (a && b > INT64_MAX / a)
        return -1;
    *out = a * b;
    return 0;
}
