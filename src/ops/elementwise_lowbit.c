/* The one-byte element types besides float8: float4e2m1 (ONNX 23),
 * float8e8m0 (24), and the 2-bit integers (25), as the ONNX reference
 * computes them (ml_dtypes and onnx.numpy_helper.to_float8e8m0). tandem
 * holds each value in one byte: the 4-bit code of float4e2m1, the
 * exponent byte of float8e8m0, int2 sign-extended, uint2 as it is. */
#include "ops/elementwise.h"

#include <math.h>
#include <string.h>

/* float4e2m1: sign, 2 exponent bits (bias 1), 1 mantissa bit; no infinity
 * and no NaN. The magnitudes of codes 0 to 7. */
static const double f4_mag[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};

double op_float4e2m1_to_f64(uint8_t c)
{
    double v = f4_mag[c & 7u];
    return c & 8u ? -v : v;
}

/* Round to nearest, ties to the even code; beyond 6 (infinities too) is 6
 * with the sign. NaN becomes 0x8 (-0) for a NaN with the sign bit clear and
 * 0x0 for one with it set, as ml_dtypes 0.5+ converts it. */
uint8_t op_f64_to_float4e2m1(double v)
{
    if (v != v)
        return signbit(v) ? 0x0 : 0x8;
    uint8_t sign = signbit(v) ? 0x8 : 0x0;
    double a = fabs(v);
    if (a >= 6.0)
        return (uint8_t)(sign | 7u);
    unsigned best = 0;
    for (unsigned k = 1; k < 8; k++) {
        double dk = fabs(a - f4_mag[k]), db = fabs(a - f4_mag[best]);
        if (dk < db || (dk == db && (k & 1u) == 0))
            best = k;
    }
    return (uint8_t)(sign | best);
}

/* float8e8m0: an unsigned power of two, 2^(c - 127); 0xFF is NaN. */
double op_float8e8m0_to_f64(uint8_t c) { return c == 0xFF ? NAN : ldexp(1.0, (int)c - 127); }

/* From the float32 value of v: its exponent field, rounded by round_mode
 * (OP_E8M0_UP: up when the mantissa is not zero; OP_E8M0_NEAREST: on the
 * guard bit as the reference does; OP_E8M0_DOWN: dropped). The sign is
 * ignored, NaN and infinities become 0xFF, and with saturate the largest
 * exponent (0xFE) does not round up into 0xFF. */
uint8_t op_f64_to_float8e8m0(double v, int saturate, int round_mode)
{
    float f = (float)v;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    unsigned e = (bits >> 23) & 0xFFu;
    if (e == 0xFFu)
        return 0xFF;
    int up = 0;
    if (round_mode == OP_E8M0_UP) {
        up = (bits & 0x7FFFFFu) != 0;
    } else if (round_mode == OP_E8M0_NEAREST) {
        int g = (bits & 0x400000u) != 0, r = (bits & 0x200000u) != 0, s = (bits & 0x1FFFFFu) != 0;
        up = g && (r || s || e > 0);
    }
    if (up && saturate && e == 0xFEu)
        up = 0;
    return (uint8_t)(e + (unsigned)up);
}

int op_e8m0_round_mode(const char *s)
{
    if (!s || strcmp(s, "up") == 0)
        return OP_E8M0_UP;
    if (strcmp(s, "nearest") == 0)
        return OP_E8M0_NEAREST;
    return strcmp(s, "down") == 0 ? OP_E8M0_DOWN : -1;
}

int op_is_lowbit(tdm_dtype dt)
{
    return op_is_float8(dt) || dt == TDM_FLOAT4E2M1 || dt == TDM_FLOAT8E8M0 || dtype_packed_bits(dt);
}

int op_lowbit_int_range(tdm_dtype dt, int *lo, int *hi)
{
    switch (dt) {
    case TDM_INT4: *lo = -8; *hi = 7; return 1;
    case TDM_UINT4: *lo = 0; *hi = 15; return 1;
    case TDM_INT2: *lo = -2; *hi = 1; return 1;
    case TDM_UINT2: *lo = 0; *hi = 3; return 1;
    default: return 0;
    }
}

double op_lowbit_to_f64(uint8_t c, tdm_dtype dt)
{
    if (op_is_float8(dt))
        return op_float8_to_f64(c, dt);
    if (dt == TDM_FLOAT4E2M1)
        return op_float4e2m1_to_f64(c);
    if (dt == TDM_FLOAT8E8M0)
        return op_float8e8m0_to_f64(c);
    if (dt == TDM_INT4 || dt == TDM_INT2)
        return (double)(int8_t)c;
    return (double)c;
}

uint8_t op_f64_to_lowbit(double v, tdm_dtype dt, int saturate, int round_mode)
{
    int lo, hi;
    if (op_is_float8(dt))
        return op_f64_to_float8(v, dt, saturate);
    if (dt == TDM_FLOAT4E2M1)
        return op_f64_to_float4e2m1(v);
    if (dt == TDM_FLOAT8E8M0)
        return op_f64_to_float8e8m0(v, saturate, round_mode);
    if (!op_lowbit_int_range(dt, &lo, &hi))
        return 0;
    /* ml_dtypes: truncated toward zero; what is then outside the range
     * (NaN and infinities too) is 0 */
    double t = trunc(v);
    return t != t || t < lo || t > hi ? 0 : (uint8_t)(int8_t)t;
}
