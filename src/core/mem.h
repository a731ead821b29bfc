/* Allocation with checked sizes. All library allocations go through these so
 * that tests can inject failures (mem_fail_after). */
#ifndef TDM_CORE_MEM_H
#define TDM_CORE_MEM_H

#include <stddef.h>
#include <stdint.h>

void *mem_alloc(size_t size);             /* malloc; NULL on failure or size 0 → 1 byte */
void *mem_calloc(size_t n, size_t size);  /* zeroed; NULL on failure or overflow */
void *mem_realloc(void *p, size_t size);
void mem_free(void *p);
char *mem_strdup(const char *s);
char *mem_strndup(const char *s, size_t n);

/* Grows *arr (of *cap elements of elem bytes) so that it holds at least need
 * elements. Returns 0 on success, -1 on overflow or out of memory. */
int mem_grow(void **arr, size_t *cap, size_t need, size_t elem);

/* Checked arithmetic: return 0 and store the result, or -1 on overflow. */
int mem_mul(size_t a, size_t b, size_t *out);
int mem_add(size_t a, size_t b, size_t *out);
int mem_mul_i64(int64_t a, int64_t b, int64_t *out);

/* Test hook: the n-th allocation from now fails (0 disables). */
void mem_fail_after(long n);

#endif
