/* Comparison of a computed value with the expected one, with the ONNX
 * backend tests' rules: floats within atol + rtol * |expected| (float16 and
 * bfloat16 widened first, complex by magnitude of the difference), NaN
 * equal to NaN, infinities equal only to themselves; integers, booleans
 * and strings exactly; element types and shapes must match; sequences item
 * by item; an absent optional equals only an absent optional. Public API
 * only. */
#ifndef TDM_TEST_COMPARE_H
#define TDM_TEST_COMPARE_H

#include <tandem/tandem.h>

#include <stddef.h>

#define CMP_RTOL 1e-3
#define CMP_ATOL 1e-7

typedef struct cmp_report {
    size_t mismatches;   /* elements outside the tolerance */
    double max_abs;      /* largest |got - expected| over finite elements */
    char where[128];     /* its index, "[1, 2]" (with an item prefix in sequences) */
} cmp_report;

/* Returns 1 when got matches want. On a mismatch, msg receives one
 * sentence describing the first difference (and how many there are).
 * rep (may be NULL) receives the error figures in both cases. */
int cmp_values(const tdm_tensor *got, const tdm_tensor *want, double rtol, double atol, char *msg, size_t msize,
               cmp_report *rep);

/* Element i of a float-like tensor (float, double, float16, bfloat16) as a
 * double. */
double cmp_get_f64(const tdm_tensor *t, size_t i);

#endif
