/* tandem's OpenCL C 1.2 kernels, embedded into libtandem at build time
 * (opencl.cmake) and built once per device context (ocl_device.c).
 *
 * The program is built twice on demand: for float32 tensors (T = float) and
 * for float16 tensors (-DTDM_FP16: storage in half through vload_half /
 * vstore_half, which are core OpenCL 1.2, arithmetic in float — as the CPU
 * kernels compute float16). The data-movement kernels (copy_strided_*,
 * gather_*, resize_near_*) work on raw elements of 1, 2, 4 or 8 bytes and are
 * taken from the float32 build whatever the tensor's type.
 *
 * Every kernel bounds-checks its global ids: the host rounds global sizes up
 * to a multiple of the work-group size. Indices are 32-bit (the host refuses
 * tensors of more than INT_MAX elements). Shapes of up to 8 dimensions travel
 * as int8 vectors and are unpacked with vstore8 into private arrays. */

#ifdef TDM_FP16
#define T half
#define LD(p, i) vload_half((size_t)(i), (p))
#define ST(p, i, v) vstore_half_rte((v), (size_t)(i), (p))
#else
#define T float
#define LD(p, i) ((p)[(i)])
#define ST(p, i, v) ((p)[(i)] = (v))
#endif

#ifndef TS
#define TS 16
#endif

/* ------------------------------------------------------------- elementwise */

/* Unary op codes: keep in sync with enum ocl_unary in ocl_ops.c. */
float un_op(int op, float v, float a, float b, float g);
float un_op(int op, float v, float a, float b, float g)
{
    float e, r;
    switch (op) {
    case 0: return fabs(v);
    case 1: return -v;
    case 2: return exp(v);
    case 3: return log(v);
    case 4: return sqrt(v);
    case 5: return 1.0f / v;
    case 6: return floor(v);
    case 7: return ceil(v);
    case 8: return rint(v);
    case 9: return v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : v;
    case 10: return erf(v);
    case 11: return sin(v);
    case 12: return cos(v);
    case 13: return tan(v);
    case 14: return asin(v);
    case 15: return acos(v);
    case 16: return atan(v);
    case 17: return sinh(v);
    case 18: return cosh(v);
    case 19: return asinh(v);
    case 20: return acosh(v);
    case 21: return atanh(v);
    case 22: return v < 0.0f ? 0.0f : v;
    case 23: return v < 0.0f ? a * v : v;
    case 24: return v < 0.0f ? a * expm1(v) : v;
    case 25: return v <= 0.0f ? g * (a * exp(v) - a) : g * v;
    case 26: return v > 0.0f ? v : a * expm1(v / a);
    case 27:
        e = exp(-fabs(v));
        r = 1.0f / (1.0f + e);
        return v >= 0.0f ? r : e * r;
    case 28: return fmax(0.0f, fmin(1.0f, a * v + b));
    case 29: return v * fmax(0.0f, fmin(1.0f, a * v + b));
    case 30: return v > 0.0f ? v + log1p(exp(-v)) : log1p(exp(v));
    case 31: return v / (1.0f + fabs(v));
    case 32: return tanh(v);
    case 33: return v > a ? v : 0.0f;
    case 34: /* Clip: a NaN passes through */
        v = v < a ? a : v;
        return v > b ? b : v;
    case 35: return v * a;
    case 36: return v / a;
    default: return v;
    }
}

__kernel void unary(__global const T *x, __global T *y, int n, int op, float a, float b, float g)
{
    int i = (int)get_global_id(0);
    if (i < n)
        ST(y, i, un_op(op, LD(x, i), a, b, g));
}

/* Binary op codes: keep in sync with enum ocl_binary in ocl_ops.c. */
float bin_op(int op, float x, float y);
float bin_op(int op, float x, float y)
{
    switch (op) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return x * y;
    case 3: return x / y;
    case 4: return pow(x, y);
    case 5: return (isnan(x) || x > y) ? x : y;
    case 6: return (isnan(x) || x < y) ? x : y;
    case 7: return x < 0.0f ? y * x : x;
    default: return x;
    }
}

/* mode 0: same shapes; 1: b is one element; 2: a is one element. */
__kernel void binary_flat(__global const T *a, __global const T *b, __global T *y, int n, int op, int mode)
{
    int i = (int)get_global_id(0);
    if (i >= n)
        return;
    float x = LD(a, mode == 2 ? 0 : i), z = LD(b, mode == 1 ? 0 : i);
    ST(y, i, bin_op(op, x, z));
}

/* y (shape od, rank dims) = a op b with element strides sa, sb per output
 * dimension (0 where broadcast). */
__kernel void binary_bcast(__global const T *a, __global const T *b, __global T *y, int n, int op, int rank,
                           int8 od, int8 sa, int8 sb)
{
    int i = (int)get_global_id(0);
    if (i >= n)
        return;
    int d[8], s1[8], s2[8];
    vstore8(od, 0, d);
    vstore8(sa, 0, s1);
    vstore8(sb, 0, s2);
    int r = i, oa = 0, ob = 0;
    for (int k = rank - 1; k >= 0; k--) {
        int c = r % d[k];
        r /= d[k];
        oa += c * s1[k];
        ob += c * s2[k];
    }
    ST(y, i, bin_op(op, LD(a, oa), LD(b, ob)));
}

/* BatchNormalization (inference): channel c = (i / inner) % C. */
__kernel void batchnorm(__global const T *x, __global const T *sc, __global const T *bi, __global const T *mean,
                        __global const T *var, __global T *y, int n, int C, int inner, float eps)
{
    int i = (int)get_global_id(0);
    if (i >= n)
        return;
    int c = (i / inner) % C;
    float s = LD(sc, c) / sqrt(LD(var, c) + eps);
    ST(y, i, (LD(x, i) - LD(mean, c)) * s + LD(bi, c));
}

/* ------------------------------------------------------------------ GEMM */

/* Y[bat] (M x N, contiguous) = alpha * A[bat] B[bat] + beta * C, tiled TS x TS
 * in local memory. A element (m, k) at offa + m*sam + k*sak (+ batch offset),
 * B element (k, n) at offb + k*sbk + n*sbn; batch index decomposed over nb
 * (<= 4) dims bd with batch strides bsa, bsb. C element (m, n) at m*scm +
 * n*scn (0 strides broadcast). */
__kernel void gemm(__global const T *A, __global const T *B, __global const T *Cm, __global T *Y, int M, int N,
                   int K, int sam, int sak, int sbk, int sbn, int offa, int offb, int nb, int4 bd, int4 bsa, int4 bsb,
                   float alpha, float beta, int has_c, int scm, int scn)
{
    __local float As[TS][TS + 1];
    __local float Bs[TS][TS + 1];
    int lc = (int)get_local_id(0), lr = (int)get_local_id(1);
    int col = (int)get_group_id(0) * TS + lc, row = (int)get_group_id(1) * TS + lr;
    int bat = (int)get_global_id(2);
    int dd[4], da[4], db[4];
    vstore4(bd, 0, dd);
    vstore4(bsa, 0, da);
    vstore4(bsb, 0, db);
    int oa = offa, ob = offb, r = bat;
    for (int k = nb - 1; k >= 0; k--) {
        int c = r % dd[k];
        r /= dd[k];
        oa += c * da[k];
        ob += c * db[k];
    }
    float acc = 0.0f;
    for (int t = 0; t < K; t += TS) {
        int ka = t + lc, kb = t + lr;
        As[lr][lc] = (row < M && ka < K) ? (float)LD(A, oa + row * sam + ka * sak) : 0.0f;
        Bs[lr][lc] = (kb < K && col < N) ? (float)LD(B, ob + kb * sbk + col * sbn) : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; k++)
            acc += As[lr][k] * Bs[k][lc];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N) {
        float v = alpha * acc;
        if (has_c)
            v += beta * LD(Cm, row * scm + col * scn);
        ST(Y, (bat * M + row) * N + col, v);
    }
}

/* The same product, register-blocked: work-item (col, row block, batch)
 * computes RB rows of one column with no local memory and no barriers —
 * consecutive work-items read consecutive B elements (vectorised on CPU
 * devices, coalesced on GPUs) while the A elements are shared. RB is 8
 * (gemm_rb8) or 1 (gemm_rb1, for few rows). */
#define GEMM_RB(NAME, RB)                                                                                      \
    __kernel void NAME(__global const T *A, __global const T *B, __global const T *Cm, __global T *Y, int M,  \
                       int N, int K, int sam, int sak, int sbk, int sbn, int offa, int offb, int nb, int4 bd,    \
                       int4 bsa, int4 bsb, float alpha, float beta, int has_c, int scm, int scn)               \
    {                                                                                                          \
        int col = (int)get_global_id(0), m0 = (int)get_global_id(1) * RB, bat = (int)get_global_id(2);       \
        if (col >= N || m0 >= M)                                                                               \
            return;                                                                                            \
        int dd[4], da[4], db[4];                                                                               \
        vstore4(bd, 0, dd);                                                                                    \
        vstore4(bsa, 0, da);                                                                                   \
        vstore4(bsb, 0, db);                                                                                   \
        int oa = offa, ob = offb, r = bat;                                                                     \
        for (int k = nb - 1; k >= 0; k--) {                                                                    \
            int c = r % dd[k];                                                                                 \
            r /= dd[k];                                                                                        \
            oa += c * da[k];                                                                                   \
            ob += c * db[k];                                                                                   \
        }                                                                                                      \
        int nr = min(RB, M - m0);                                                                              \
        int ar[RB];                                                                                            \
        float acc[RB];                                                                                         \
        for (int i = 0; i < RB; i++) {                                                                         \
            ar[i] = oa + (m0 + min(i, nr - 1)) * sam;                                                          \
            acc[i] = 0.0f;                                                                                     \
        }                                                                                                      \
        int bo = ob + col * sbn;                                                                               \
        for (int k = 0; k < K; k++) {                                                                          \
            float b = LD(B, bo + k * sbk);                                                                     \
            for (int i = 0; i < RB; i++)                                                                       \
                acc[i] += LD(A, ar[i] + k * sak) * b;                                                          \
        }                                                                                                      \
        for (int i = 0; i < nr; i++) {                                                                         \
            float v = alpha * acc[i];                                                                          \
            if (has_c)                                                                                         \
                v += beta * LD(Cm, (m0 + i) * scm + col * scn);                                                \
            ST(Y, (bat * M + m0 + i) * N + col, v);                                                            \
        }                                                                                                      \
    }
GEMM_RB(gemm_rb8, 8)
GEMM_RB(gemm_rb1, 1)

/* ------------------------------------------------------------ convolution */

/* Conv as an implicit GEMM per (image, group): rows are the group's output
 * channels (Mg), columns the output pixels (OH*OW), the reduction runs over
 * Cg*KH*KW; tiles of W and of the virtual im2col matrix go through local
 * memory. global: (cols, rows, N*group). */
__kernel void conv_igemm(__global const T *x, __global const T *w, __global const T *bias, __global T *y, int C,
                         int H, int W, int M, int OH, int OW, int KH, int KW, int sh, int sw, int ph, int pw, int dh,
                         int dw, int Cg, int Mg, int group, int has_bias)
{
    __local float As[TS][TS + 1];
    __local float Bs[TS][TS + 1];
    int lc = (int)get_local_id(0), lr = (int)get_local_id(1);
    int col = (int)get_group_id(0) * TS + lc, row = (int)get_group_id(1) * TS + lr;
    int ng = (int)get_global_id(2), n = ng / group, g = ng % group;
    int KK = KH * KW, K = Cg * KK, P = OH * OW;
    int oc = g * Mg + row;
    int oh = col / OW, ow = col % OW;
    int ih0 = oh * sh - ph, iw0 = ow * sw - pw;
    int xbase = (n * C + g * Cg) * H * W;
    float acc = 0.0f;
    for (int t = 0; t < K; t += TS) {
        int ka = t + lc, kb = t + lr;
        As[lr][lc] = (row < Mg && ka < K) ? (float)LD(w, oc * K + ka) : 0.0f;
        float v = 0.0f;
        if (kb < K && col < P) {
            int ic = kb / KK, rr = kb % KK, kh = rr / KW, kw = rr % KW;
            int ih = ih0 + kh * dh, iw = iw0 + kw * dw;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                v = LD(x, xbase + (ic * H + ih) * W + iw);
        }
        Bs[lr][lc] = v;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; k++)
            acc += As[lr][k] * Bs[k][lc];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < Mg && col < P) {
        if (has_bias)
            acc += LD(bias, oc);
        ST(y, (n * M + oc) * P + col, acc);
    }
}

/* Vector loads of 8 consecutive (LD8) or 8 even (LD16E) elements. */
#ifdef TDM_FP16
#define LD8(p, i) (float8)(LD(p, i), LD(p, (i) + 1), LD(p, (i) + 2), LD(p, (i) + 3), LD(p, (i) + 4), \
                           LD(p, (i) + 5), LD(p, (i) + 6), LD(p, (i) + 7))
#define LD16E(p, i) (float8)(LD(p, i), LD(p, (i) + 2), LD(p, (i) + 4), LD(p, (i) + 6), LD(p, (i) + 8), \
                             LD(p, (i) + 10), LD(p, (i) + 12), LD(p, (i) + 14))
#else
#define LD8(p, i) vload8(0, (p) + (i))
#define LD16E(p, i) ((float8)(vload8(0, (p) + (i)).even, vload8(0, (p) + (i) + 8).even))
#endif

/* Convolution for narrow images, vectorised over output channels: wt is W
 * transposed to [Cg*KH*KW][M] (row stride M, 8 spare elements at the end),
 * so that 8 consecutive channels of a tap are one vector load. Work-item
 * (output pixel, block of 8 channels of a group, image*group); lanes past
 * the group's channels are computed and dropped. global: (OH*OW,
 * ceil(Mg/8), N*group). */
__kernel void conv_oc8(__global const T *x, __global const T *wt, __global const T *bias, __global T *y, int C,
                       int H, int W, int M, int OH, int OW, int KH, int KW, int sh, int sw, int ph, int pw, int dh,
                       int dw, int Cg, int Mg, int group, int has_bias)
{
    int p = (int)get_global_id(0), m0 = (int)get_global_id(1) * 8, ng = (int)get_global_id(2);
    if (p >= OH * OW || m0 >= Mg)
        return;
    int n = ng / group, g = ng % group;
    int oh = p / OW, ow = p % OW;
    int ih0 = oh * sh - ph, iw0 = ow * sw - pw;
    int KK = KH * KW, nr = min(8, Mg - m0), col = g * Mg + m0;
    int HW = H * W, xb = (n * C + g * Cg) * HW, KM = KK * M;
    /* taps outer (bounds checked once), channels inner over four
     * independent accumulators (the FMA chain is latency-bound otherwise) */
    float8 a0 = (float8)(0.0f), a1 = a0, a2 = a0, a3 = a0;
    for (int kh = 0; kh < KH; kh++) {
        int ih = ih0 + kh * dh;
        if (ih < 0 || ih >= H)
            continue;
        for (int kw = 0; kw < KW; kw++) {
            int iw = iw0 + kw * dw;
            if (iw < 0 || iw >= W)
                continue;
            int xo = xb + ih * W + iw, wo = (kh * KW + kw) * M + col, ic = 0;
            for (; ic + 4 <= Cg; ic += 4) {
                a0 += (float)LD(x, xo + ic * HW) * LD8(wt, wo + ic * KM);
                a1 += (float)LD(x, xo + (ic + 1) * HW) * LD8(wt, wo + (ic + 1) * KM);
                a2 += (float)LD(x, xo + (ic + 2) * HW) * LD8(wt, wo + (ic + 2) * KM);
                a3 += (float)LD(x, xo + (ic + 3) * HW) * LD8(wt, wo + (ic + 3) * KM);
            }
            for (; ic < Cg; ic++)
                a0 += (float)LD(x, xo + ic * HW) * LD8(wt, wo + ic * KM);
        }
    }
    float o[8];
    vstore8((a0 + a1) + (a2 + a3), 0, o);
    for (int i = 0; i < nr; i++) {
        int oc = col + i;
        ST(y, (n * M + oc) * OH * OW + p, o[i] + (has_bias ? (float)LD(bias, oc) : 0.0f));
    }
}

/* Convolution, register-blocked for CPU-like devices: work-item (block of 8
 * consecutive output pixels of a row, block of 4 output channels of a
 * group, image*group) keeps 4 float8 accumulators; each tap costs one
 * vector load of the input row (unit and double strides, away from the
 * edges) and 4 broadcast weights. global: (OH*ceil(OW/8), ceil(Mg/4),
 * N*group). */
__kernel void conv_px8(__global const T *x, __global const T *w, __global const T *bias, __global T *y, int C,
                       int H, int W, int M, int OH, int OW, int KH, int KW, int sh, int sw, int ph, int pw, int dh,
                       int dw, int Cg, int Mg, int group, int has_bias)
{
    int nb = (OW + 7) / 8;
    int q = (int)get_global_id(0), m0 = (int)get_global_id(1) * 4, ng = (int)get_global_id(2);
    int oh = q / nb, ow0 = (q % nb) * 8;
    if (oh >= OH || m0 >= Mg)
        return;
    int n = ng / group, g = ng % group;
    int ih0 = oh * sh - ph, iwb = ow0 * sw - pw;
    int KK = KH * KW, ws = Cg * KK, nr = min(4, Mg - m0);
    int xb = (n * C + g * Cg) * H * W;
    int w0 = (g * Mg + m0) * ws, w1 = (g * Mg + m0 + min(1, nr - 1)) * ws;
    int w2 = (g * Mg + m0 + min(2, nr - 1)) * ws, w3 = (g * Mg + m0 + min(3, nr - 1)) * ws;
    float8 a0 = (float8)(0.0f), a1 = a0, a2 = a0, a3 = a0;
    float xs[8];
    for (int ic = 0; ic < Cg; ic++) {
        for (int kh = 0; kh < KH; kh++) {
            int ih = ih0 + kh * dh;
            if (ih < 0 || ih >= H)
                continue;
            int xrow = xb + (ic * H + ih) * W, wo = ic * KK + kh * KW;
            for (int kw = 0; kw < KW; kw++) {
                int iw = iwb + kw * dw;
                float8 xv;
                if (sw == 1 && iw >= 0 && iw + 7 < W) {
                    xv = LD8(x, xrow + iw);
                } else if (sw == 2 && iw >= 0 && iw + 15 < W) {
                    xv = LD16E(x, xrow + iw);
                } else {
                    for (int j = 0; j < 8; j++) {
                        int c = iw + j * sw;
                        xs[j] = (c >= 0 && c < W) ? (float)LD(x, xrow + clamp(c, 0, W - 1)) : 0.0f;
                    }
                    xv = vload8(0, xs);
                }
                int k = wo + kw;
                a0 += xv * (float)LD(w, w0 + k);
                a1 += xv * (float)LD(w, w1 + k);
                a2 += xv * (float)LD(w, w2 + k);
                a3 += xv * (float)LD(w, w3 + k);
            }
        }
    }
    int np = min(8, OW - ow0);
    float8 acc[4] = {a0, a1, a2, a3};
    for (int i = 0; i < nr; i++) {
        int oc = g * Mg + m0 + i;
        float b = has_bias ? (float)LD(bias, oc) : 0.0f;
        vstore8(acc[i], 0, xs);
        int yb = ((n * M + oc) * OH + oh) * OW + ow0;
        for (int j = 0; j < np; j++)
            ST(y, yb + j, xs[j] + b);
    }
}

/* Direct convolution, one output element per work-item (depthwise and other
 * convolutions with few output channels per group). global: (OH*OW, M, N). */
__kernel void conv_direct(__global const T *x, __global const T *w, __global const T *bias, __global T *y, int C,
                          int H, int W, int M, int OH, int OW, int KH, int KW, int sh, int sw, int ph, int pw, int dh,
                          int dw, int Cg, int Mg, int has_bias)
{
    int p = (int)get_global_id(0), oc = (int)get_global_id(1), n = (int)get_global_id(2);
    if (p >= OH * OW || oc >= M)
        return;
    int oh = p / OW, ow = p % OW, g = oc / Mg;
    int ih0 = oh * sh - ph, iw0 = ow * sw - pw;
    float acc = has_bias ? (float)LD(bias, oc) : 0.0f;
    float s = 0.0f;
    for (int ic = 0; ic < Cg; ic++) {
        int xb = ((n * C + g * Cg + ic) * H) * W, wb = ((oc * Cg + ic) * KH) * KW;
        for (int kh = 0; kh < KH; kh++) {
            int ih = ih0 + kh * dh;
            int vh = ih >= 0 && ih < H;
            int xrow = xb + clamp(ih, 0, H - 1) * W;
            for (int kw = 0; kw < KW; kw++) {
                int iw = iw0 + kw * dw;
                float xv = LD(x, xrow + clamp(iw, 0, W - 1));
                s += ((vh && iw >= 0 && iw < W) ? xv : 0.0f) * LD(w, wb + kh * KW + kw);
            }
        }
    }
    ST(y, (n * M + oc) * OH * OW + p, s + acc);
}

/* ConvTranspose by gathering: output (n, oc, oh, ow) sums x(n, ic, ih, iw) *
 * w(ic, oc % Mg, kh, kw) over ic in the group and the taps with
 * oh = ih*sh - ph + kh*dh. W is [C, Mg, KH, KW]. global: (OH*OW, M, N). */
__kernel void convt_direct(__global const T *x, __global const T *w, __global const T *bias, __global T *y, int C,
                           int H, int W, int M, int OH, int OW, int KH, int KW, int sh, int sw, int ph, int pw, int dh,
                           int dw, int Cg, int Mg, int has_bias)
{
    int p = (int)get_global_id(0), oc = (int)get_global_id(1), n = (int)get_global_id(2);
    if (p >= OH * OW || oc >= M)
        return;
    int oh = p / OW, ow = p % OW, g = oc / Mg, om = oc % Mg;
    float s = 0.0f;
    for (int kh = 0; kh < KH; kh++) {
        int th = oh + ph - kh * dh;
        if (th < 0 || th % sh)
            continue;
        int ih = th / sh;
        if (ih >= H)
            continue;
        for (int kw = 0; kw < KW; kw++) {
            int tw = ow + pw - kw * dw;
            if (tw < 0 || tw % sw)
                continue;
            int iw = tw / sw;
            if (iw >= W)
                continue;
            for (int ic = 0; ic < Cg; ic++) {
                int c = g * Cg + ic;
                s += LD(x, ((n * C + c) * H + ih) * W + iw) * LD(w, ((c * Mg + om) * KH + kh) * KW + kw);
            }
        }
    }
    if (has_bias)
        s += LD(bias, oc);
    ST(y, (n * M + oc) * OH * OW + p, s);
}

/* ---------------------------------------------------------------- pooling */

/* MaxPool / AveragePool over planes of H x W (1-D pools have H = 1). A NaN
 * is kept only when it is the first tap (as the CPU kernel). Average divides
 * by the valid taps, or (include_pad) by the taps inside the padded input. */
__kernel void pool2d(__global const T *x, __global T *y, int planes, int H, int W, int OH, int OW, int KH, int KW,
                     int sh, int sw, int ph, int pw, int dh, int dw, int is_max, int include_pad, int PH, int PW)
{
    int i = (int)get_global_id(0);
    if (i >= planes * OH * OW)
        return;
    int ow = i % OW, oh = (i / OW) % OH, pl = i / (OW * OH);
    int ch = oh * sh - ph, cw = ow * sw - pw;
    int xb = pl * H * W;
    float best = 0.0f, sum = 0.0f;
    int any = 0, cnt = 0, pcnt = 0;
    for (int kh = 0; kh < KH; kh++) {
        int ih = ch + kh * dh;
        int inpad_h = ih + ph >= 0 && ih + ph < PH;
        for (int kw = 0; kw < KW; kw++) {
            int iw = cw + kw * dw;
            if (inpad_h && iw + pw >= 0 && iw + pw < PW)
                pcnt++;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                continue;
            float v = LD(x, xb + ih * W + iw);
            if (!any || v > best)
                best = v;
            any = 1;
            sum += v;
            cnt++;
        }
    }
    if (is_max) {
        ST(y, i, best);
    } else {
        int c = include_pad ? pcnt : cnt;
        ST(y, i, c > 0 ? sum / (float)c : 0.0f);
    }
}

/* ------------------------------------------------------------- reductions */

/* Accumulates v into acc: op 0 sum, 1 max, 2 min (a NaN propagates), 3 max
 * keeping a NaN only as the first element (GlobalMaxPool, as the CPU). */
float red_step(int op, float acc, float v);
float red_step(int op, float acc, float v)
{
    if (op == 0)
        return acc + v;
    if (op == 3)
        return v > acc ? v : acc;
    if (isnan(acc) || isnan(v))
        return isnan(acc) ? acc : v;
    return op == 1 ? fmax(acc, v) : fmin(acc, v);
}

/* One output per work-item: kept dims (nk, kd/ks: output shape and input
 * strides), reduced dims (nr, rd/rs), rcount reduced elements; op as
 * red_step, the sum times scale (mean). */
__kernel void reduce_gen(__global const T *x, __global T *y, int nout, int op, float scale, int nk, int8 kd, int8 ks,
                         int nr, int8 rd, int8 rs, int rcount)
{
    int o = (int)get_global_id(0);
    if (o >= nout)
        return;
    int d[8], s[8];
    vstore8(kd, 0, d);
    vstore8(ks, 0, s);
    int base = 0, r = o;
    for (int k = nk - 1; k >= 0; k--) {
        base += (r % d[k]) * s[k];
        r /= d[k];
    }
    vstore8(rd, 0, d);
    vstore8(rs, 0, s);
    float acc = op == 0 ? 0.0f : (float)LD(x, base);
    if (nr == 1) {
        int st = s[0];
        for (int j = 0; j < rcount; j++) {
            float v = LD(x, base + j * st);
            acc = red_step(op, acc, v);
        }
    } else {
        for (int j = 0; j < rcount; j++) {
            int off = base, q = j;
            for (int k = nr - 1; k >= 0; k--) {
                off += (q % d[k]) * s[k];
                q /= d[k];
            }
            float v = LD(x, off);
            acc = red_step(op, acc, v);
        }
    }
    ST(y, o, op == 0 ? acc * scale : acc);
}

/* Softmax / LogSoftmax along n elements of stride inner, one row per
 * work-item. global: outer * inner. */
__kernel void softmax(__global const T *x, __global T *y, int rows, int n, int inner, int logsm)
{
    int i = (int)get_global_id(0);
    if (i >= rows)
        return;
    int base = (i / inner) * n * inner + i % inner;
    float mx = LD(x, base);
    for (int j = 1; j < n; j++) {
        float v = LD(x, base + j * inner);
        if (v > mx)
            mx = v;
    }
    float sum = 0.0f;
    for (int j = 0; j < n; j++)
        sum += exp(LD(x, base + j * inner) - mx);
    if (logsm) {
        float l = mx + log(sum);
        for (int j = 0; j < n; j++)
            ST(y, base + j * inner, LD(x, base + j * inner) - l);
    } else {
        float inv = 1.0f / sum;
        for (int j = 0; j < n; j++)
            ST(y, base + j * inner, exp(LD(x, base + j * inner) - mx) * inv);
    }
}

/* LayerNormalization over rows of cols elements, a work-group of WG
 * work-items per row (local sums). global: (rows * WG). */
#define LN_WG 64
__kernel __attribute__((reqd_work_group_size(LN_WG, 1, 1))) void layernorm(
    __global const T *x, __global const T *sc, __global const T *bi, __global T *y, int cols, float eps, int has_b,
    int nsc)
{
    __local float part[LN_WG];
    int l = (int)get_local_id(0), row = (int)get_group_id(0);
    int base = row * cols;
    float s = 0.0f;
    for (int j = l; j < cols; j += LN_WG)
        s += LD(x, base + j);
    part[l] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = LN_WG / 2; w > 0; w >>= 1) {
        if (l < w)
            part[l] += part[l + w];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float mean = part[0] / (float)cols;
    barrier(CLK_LOCAL_MEM_FENCE);
    s = 0.0f;
    for (int j = l; j < cols; j += LN_WG) {
        float d = LD(x, base + j) - mean;
        s += d * d;
    }
    part[l] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = LN_WG / 2; w > 0; w >>= 1) {
        if (l < w)
            part[l] += part[l + w];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float inv = 1.0f / sqrt(part[0] / (float)cols + eps);
    for (int j = l; j < cols; j += LN_WG) {
        int k = nsc == 1 ? 0 : j;
        float v = (LD(x, base + j) - mean) * inv * LD(sc, k);
        if (has_b)
            v += LD(bi, k);
        ST(y, base + j, v);
    }
}

/* ----------------------------------------------------------------- Resize */

/* One linear pass along one axis: y[q, j, r] = w0 x[q, i0, r] + w1 x[q, i1, r]
 * with (i0, i1, w0, w1) of output index j from the tables. Intermediate
 * passes keep float (as the CPU kernel), hence the four in/out variants. */
#define RESIZE_LIN(NAME, TI, LDI, TO, STO)                                                                     \
    __kernel void NAME(__global const TI *x, __global TO *y, int total, int nin, int nout, int inner,         \
                       __global const int *idx, __global const float *wt)                                     \
    {                                                                                                          \
        int i = (int)get_global_id(0);                                                                         \
        if (i >= total)                                                                                        \
            return;                                                                                            \
        int r = i % inner, j = (i / inner) % nout, q = i / (inner * nout);                                    \
        float v = wt[2 * j] * (float)LDI(x, (q * nin + idx[2 * j]) * inner + r) +                             \
                  wt[2 * j + 1] * (float)LDI(x, (q * nin + idx[2 * j + 1]) * inner + r);                      \
        STO(y, i, v);                                                                                          \
    }
#define LDF(p, i) ((p)[(i)])
#define STF(p, i, v) ((p)[(i)] = (v))
RESIZE_LIN(resize_lin_tt, T, LD, T, ST)
RESIZE_LIN(resize_lin_tf, T, LD, float, STF)
RESIZE_LIN(resize_lin_ff, float, LDF, float, STF)
RESIZE_LIN(resize_lin_ft, float, LDF, T, ST)

/* ---------------------------------------------------------- data movement */

/* y[i] = x[base + sum_k c_k * is_k] for the coordinates c of i in od:
 * Transpose, Slice, Expand. */
#define COPY_STRIDED(NAME, E)                                                                                  \
    __kernel void NAME(__global const E *x, __global E *y, int n, int rank, int8 od, int8 is, int base)       \
    {                                                                                                          \
        int i = (int)get_global_id(0);                                                                         \
        if (i >= n)                                                                                            \
            return;                                                                                            \
        int d[8], s[8];                                                                                        \
        vstore8(od, 0, d);                                                                                     \
        vstore8(is, 0, s);                                                                                     \
        int off = base, r = i;                                                                                 \
        for (int k = rank - 1; k >= 0; k--) {                                                                  \
            off += (r % d[k]) * s[k];                                                                          \
            r /= d[k];                                                                                         \
        }                                                                                                      \
        y[i] = x[off];                                                                                         \
    }
COPY_STRIDED(copy_strided_1, uchar)
COPY_STRIDED(copy_strided_2, ushort)
COPY_STRIDED(copy_strided_4, uint)
COPY_STRIDED(copy_strided_8, ulong)

/* Gather along an axis: x viewed [outer, axis_n, inner], nidx indices
 * (already normalised to [0, axis_n)). */
#define GATHER(NAME, E)                                                                                        \
    __kernel void NAME(__global const E *x, __global const int *idx, __global E *y, int n, int nidx,          \
                       int axis_n, int inner)                                                                 \
    {                                                                                                          \
        int i = (int)get_global_id(0);                                                                         \
        if (i >= n)                                                                                            \
            return;                                                                                            \
        int r = i % inner, t = (i / inner) % nidx, o = i / (inner * nidx);                                    \
        y[i] = x[(o * axis_n + idx[t]) * inner + r];                                                           \
    }
GATHER(gather_1, uchar)
GATHER(gather_2, ushort)
GATHER(gather_4, uint)
GATHER(gather_8, ulong)

/* Nearest Resize: the source offset of output i is the sum over dims of
 * tab[ts_k + c_k] (per-axis tables of input offsets computed on the host). */
#define RESIZE_NEAR(NAME, E)                                                                                   \
    __kernel void NAME(__global const E *x, __global E *y, int n, int rank, int8 od, int8 ts,                 \
                       __global const int *tab)                                                               \
    {                                                                                                          \
        int i = (int)get_global_id(0);                                                                         \
        if (i >= n)                                                                                            \
            return;                                                                                            \
        int d[8], s[8];                                                                                        \
        vstore8(od, 0, d);                                                                                     \
        vstore8(ts, 0, s);                                                                                     \
        int off = 0, r = i;                                                                                    \
        for (int k = rank - 1; k >= 0; k--) {                                                                  \
            off += tab[s[k] + r % d[k]];                                                                       \
            r /= d[k];                                                                                         \
        }                                                                                                      \
        y[i] = x[off];                                                                                         \
    }
RESIZE_NEAR(resize_near_1, uchar)
RESIZE_NEAR(resize_near_2, ushort)
RESIZE_NEAR(resize_near_4, uint)
RESIZE_NEAR(resize_near_8, ulong)
