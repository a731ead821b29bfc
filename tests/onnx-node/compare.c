/* Output comparison for the ONNX conformance runner. */
#include "compare.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1F, man = h & 0x3FF, u;
    float f;
    if (exp == 0x1F) {
        u = sign | 0x7F800000u | (man << 13);
    } else if (exp == 0) {
        f = (float)man / 16777216.0f;
        return sign ? -f : f;
    } else {
        u = sign | ((exp + 112) << 23) | (man << 13);
    }
    memcpy(&f, &u, sizeof f);
    return f;
}

static float bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

double cmp_get_f64(const tdm_tensor *t, size_t i)
{
    const void *p = tdm_tensor_cdata(t);
    switch (tdm_tensor_dtype(t)) {
    case TDM_FLOAT: return ((const float *)p)[i];
    case TDM_DOUBLE: return ((const double *)p)[i];
    case TDM_FLOAT16: return f16_to_f32(((const uint16_t *)p)[i]);
    case TDM_BFLOAT16: return bf16_to_f32(((const uint16_t *)p)[i]);
    default: return 0.0;
    }
}

static const char *kind_name(tdm_kind k)
{
    return k == TDM_KIND_SEQUENCE ? "a sequence" : k == TDM_KIND_NONE ? "an absent optional" : "a tensor";
}

static void shape_text(const tdm_tensor *t, char *buf, size_t size)
{
    size_t off = (size_t)snprintf(buf, size, "[");
    const int64_t *d = tdm_tensor_dims(t);
    for (int k = 0; k < tdm_tensor_rank(t) && off < size; k++)
        off += (size_t)snprintf(buf + off, size - off, k ? ", %lld" : "%lld", (long long)d[k]);
    if (off < size)
        snprintf(buf + off, size - off, "]");
}

/* Multi-dimensional index of flat element i. */
static void index_text(const tdm_tensor *t, size_t i, char *buf, size_t size)
{
    int rank = tdm_tensor_rank(t);
    const int64_t *d = tdm_tensor_dims(t);
    long long idx[64];
    if (rank > 64)
        rank = 64;
    for (int k = rank - 1; k >= 0; k--) {
        size_t dk = d[k] > 0 ? (size_t)d[k] : 1;
        idx[k] = (long long)(i % dk);
        i /= dk;
    }
    size_t off = (size_t)snprintf(buf, size, "[");
    for (int k = 0; k < rank && off < size; k++)
        off += (size_t)snprintf(buf + off, size - off, k ? ", %lld" : "%lld", idx[k]);
    if (off < size)
        snprintf(buf + off, size - off, "]");
}

static int is_float(tdm_dtype dt)
{
    return dt == TDM_FLOAT || dt == TDM_DOUBLE || dt == TDM_FLOAT16 || dt == TDM_BFLOAT16;
}

/* numpy.testing.assert_allclose(actual=a, desired=b, equal_nan=True). */
static int close_enough(double a, double b, double rtol, double atol)
{
    if (isnan(b))
        return isnan(a);
    if (isinf(b))
        return a == b;
    if (isnan(a) || isinf(a))
        return 0;
    return fabs(a - b) <= atol + rtol * fabs(b);
}

static int cmp_tensor(const tdm_tensor *got, const tdm_tensor *want, double rtol, double atol, char *msg,
                      size_t msize, cmp_report *rep)
{
    char a[160], b[160];
    tdm_dtype dt = tdm_tensor_dtype(want);
    if (tdm_tensor_dtype(got) != dt) {
        snprintf(msg, msize, "element type is %s, expected %s", tdm_dtype_name(tdm_tensor_dtype(got)),
                 tdm_dtype_name(dt));
        return 0;
    }
    int rank = tdm_tensor_rank(want);
    int same = tdm_tensor_rank(got) == rank;
    for (int k = 0; same && k < rank; k++)
        same = tdm_tensor_dims(got)[k] == tdm_tensor_dims(want)[k];
    if (!same) {
        shape_text(got, a, sizeof a);
        shape_text(want, b, sizeof b);
        snprintf(msg, msize, "shape is %s, expected %s", a, b);
        return 0;
    }
    size_t n = tdm_tensor_count(want), bad = 0, first = 0;
    double fa = 0, fb = 0; /* first mismatching values (floats) */
    const void *pg = tdm_tensor_cdata(got), *pw = tdm_tensor_cdata(want);
    if (is_float(dt) || dt == TDM_COMPLEX64 || dt == TDM_COMPLEX128) {
        int cx = dt == TDM_COMPLEX64 || dt == TDM_COMPLEX128;
        for (size_t i = 0; i < n; i++) {
            double ga, wa, diff;
            int ok;
            if (cx) {
                double gr = dt == TDM_COMPLEX64 ? ((const float *)pg)[2 * i] : ((const double *)pg)[2 * i];
                double gi = dt == TDM_COMPLEX64 ? ((const float *)pg)[2 * i + 1] : ((const double *)pg)[2 * i + 1];
                double wr = dt == TDM_COMPLEX64 ? ((const float *)pw)[2 * i] : ((const double *)pw)[2 * i];
                double wi = dt == TDM_COMPLEX64 ? ((const float *)pw)[2 * i + 1] : ((const double *)pw)[2 * i + 1];
                /* numpy: |a - b| <= atol + rtol * |b| on complex magnitudes;
                 * NaN/Inf part-wise. */
                if (isnan(wr) || isnan(wi) || isinf(wr) || isinf(wi) || isnan(gr) || isnan(gi) || isinf(gr) ||
                    isinf(gi)) {
                    ok = close_enough(gr, wr, 0, 0) && close_enough(gi, wi, 0, 0);
                    diff = ok ? 0 : INFINITY;
                } else {
                    diff = hypot(gr - wr, gi - wi);
                    ok = diff <= atol + rtol * hypot(wr, wi);
                }
                ga = gr;
                wa = wr;
            } else {
                ga = cmp_get_f64(got, i);
                wa = cmp_get_f64(want, i);
                ok = close_enough(ga, wa, rtol, atol);
                diff = isfinite(ga) && isfinite(wa) ? fabs(ga - wa) : (ok ? 0 : INFINITY);
            }
            if (rep && isfinite(diff) && diff > rep->max_abs) {
                rep->max_abs = diff;
                index_text(want, i, rep->where, sizeof rep->where);
            }
            if (!ok) {
                if (rep && !isfinite(diff) && !isinf(rep->max_abs)) {
                    rep->max_abs = INFINITY;
                    index_text(want, i, rep->where, sizeof rep->where);
                }
                if (bad++ == 0) {
                    first = i;
                    fa = ga;
                    fb = wa;
                }
            }
        }
        if (rep)
            rep->mismatches += bad;
        if (bad) {
            index_text(want, first, a, sizeof a);
            if (cx)
                snprintf(msg, msize, "%zu of %zu elements differ; first at %s (real part %.9g, expected %.9g)", bad, n,
                         a, fa, fb);
            else
                snprintf(msg, msize, "%zu of %zu elements differ beyond rtol %g, atol %g; first at %s: %.9g, expected %.9g",
                         bad, n, rtol, atol, a, fa, fb);
            return 0;
        }
        return 1;
    }
    if (dt == TDM_STRING) {
        const char *const *sg = pg, *const *sw = pw;
        for (size_t i = 0; i < n; i++) {
            const char *x = sg && sg[i] ? sg[i] : "", *y = sw && sw[i] ? sw[i] : "";
            if (strcmp(x, y) != 0 && bad++ == 0)
                first = i;
        }
        if (rep)
            rep->mismatches += bad;
        if (bad) {
            const char *x = sg && sg[first] ? sg[first] : "", *y = sw && sw[first] ? sw[first] : "";
            index_text(want, first, a, sizeof a);
            snprintf(msg, msize, "%zu of %zu strings differ; first at %s: \"%.40s\", expected \"%.40s\"", bad, n, a, x,
                     y);
            return 0;
        }
        return 1;
    }
    /* Integers, booleans and the byte-sized exotic types: exact. */
    size_t es = tdm_dtype_size(dt);
    const unsigned char *bg = pg, *bw = pw;
    for (size_t i = 0; i < n; i++) {
        int differ = dt == TDM_BOOL ? (bg[i] != 0) != (bw[i] != 0) : memcmp(bg + i * es, bw + i * es, es) != 0;
        if (differ && bad++ == 0)
            first = i;
    }
    if (rep)
        rep->mismatches += bad;
    if (bad) {
        long long x = 0, y = 0;
        unsigned long long ux = 0, uy = 0;
        int is_unsigned = dt == TDM_UINT8 || dt == TDM_UINT16 || dt == TDM_UINT32 || dt == TDM_UINT64 ||
                          dt == TDM_BOOL || dt == TDM_UINT4;
        const unsigned char *xg = bg + first * es, *xw = bw + first * es;
        switch (dt) {
        case TDM_INT8: case TDM_INT4: x = *(const int8_t *)xg; y = *(const int8_t *)xw; break;
        case TDM_INT16: { int16_t p, q; memcpy(&p, xg, 2); memcpy(&q, xw, 2); x = p; y = q; break; }
        case TDM_INT32: { int32_t p, q; memcpy(&p, xg, 4); memcpy(&q, xw, 4); x = p; y = q; break; }
        case TDM_INT64: { int64_t p, q; memcpy(&p, xg, 8); memcpy(&q, xw, 8); x = p; y = q; break; }
        case TDM_UINT16: { uint16_t p, q; memcpy(&p, xg, 2); memcpy(&q, xw, 2); ux = p; uy = q; break; }
        case TDM_UINT32: { uint32_t p, q; memcpy(&p, xg, 4); memcpy(&q, xw, 4); ux = p; uy = q; break; }
        case TDM_UINT64: { uint64_t p, q; memcpy(&p, xg, 8); memcpy(&q, xw, 8); ux = p; uy = q; break; }
        default: ux = *xg; uy = *xw; is_unsigned = 1; break;
        }
        index_text(want, first, a, sizeof a);
        if (is_unsigned)
            snprintf(msg, msize, "%zu of %zu elements differ; first at %s: %llu, expected %llu", bad, n, a, ux, uy);
        else
            snprintf(msg, msize, "%zu of %zu elements differ; first at %s: %lld, expected %lld", bad, n, a, x, y);
        return 0;
    }
    return 1;
}

int cmp_values(const tdm_tensor *got, const tdm_tensor *want, double rtol, double atol, char *msg, size_t msize,
               cmp_report *rep)
{
    if (rep)
        memset(rep, 0, sizeof *rep);
    if (msize)
        msg[0] = '\0';
    if (!got || !want) {
        snprintf(msg, msize, "%s", !got ? "no value was produced" : "no expected value");
        return 0;
    }
    tdm_kind kg = tdm_tensor_kind(got), kw = tdm_tensor_kind(want);
    if (kg != kw) {
        snprintf(msg, msize, "got %s, expected %s", kind_name(kg), kind_name(kw));
        return 0;
    }
    if (kw == TDM_KIND_NONE)
        return 1;
    if (kw == TDM_KIND_TENSOR)
        return cmp_tensor(got, want, rtol, atol, msg, msize, rep);
    size_t ng = tdm_sequence_length(got), nw = tdm_sequence_length(want);
    if (ng != nw) {
        snprintf(msg, msize, "sequence has %zu items, expected %zu", ng, nw);
        return 0;
    }
    int ok = 1;
    for (size_t i = 0; i < nw; i++) {
        char sub[400];
        cmp_report r;
        int m = cmp_values(tdm_sequence_item(got, i), tdm_sequence_item(want, i), rtol, atol, sub, sizeof sub, &r);
        if (rep) {
            rep->mismatches += r.mismatches;
            if (r.max_abs > rep->max_abs || (i == 0 && r.where[0])) {
                rep->max_abs = r.max_abs;
                snprintf(rep->where, sizeof rep->where, "item %zu %.100s", i, r.where);
            }
        }
        if (!m && ok) {
            snprintf(msg, msize, "item %zu: %s", i, sub);
            ok = 0;
        }
    }
    return ok;
}
