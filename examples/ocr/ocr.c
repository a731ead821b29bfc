/* tandem-ocr: reads the text of a page with PP-OCR (det -> boxes -> rec) on
 * the devices you name, and tells where each model ran and why.
 *
 *   tandem-ocr PAGE.ppm DET.onnx REC.onnx [--devices LIST] [--expect FILE]
 *              [--ledger-dir DIR]
 *
 * --ledger-dir writes each model's ledger there (device-det.ledger.json,
 * device-rec.ledger.json) and the detector's input as det-input.npy (for
 * `tandem report DET.onnx --input x=DIR/det-input.npy`).
 *
 * PAGE is a binary PPM (P6) image. The detector (PP-OCRv4 det, a DB text
 * detector) gives a probability map; its 4-connected regions above 0.3 are
 * the text boxes (grown by DB's unclip ratio 1.6). Each box is cut from the
 * page, scaled to the recognizer's 48 x 320 input and read by PP-OCRv4 rec
 * (CTC over the character list the model keeps in its metadata). Printed:
 * the placement of each model (nodes per device, fallbacks by reason and op
 * type, partitions, estimated time), what the precision guard did, and the
 * lines read. With --expect, the lines read are compared with the file's
 * (one per line) and the exit status is 1 when any differs.
 *
 * An example of the public API only (<tandem/tandem.h>): nothing here
 * reaches into the library's internals. Exit status: 0 read as expected,
 * 1 text differs from --expect, 2 usage, 3 a tandem call failed. */
#include <tandem/tandem.h>

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DET_LIMIT 960      /* longest side of the detector's input */
#define DET_THRESH 0.3f    /* DB's binarisation threshold */
#define DET_BOX_SCORE 0.5f /* mean probability inside a kept region */
#define DET_UNCLIP 1.6     /* DB's unclip ratio */
#define REC_H 48
#define REC_W 320
#define MAX_BOXES 256

typedef struct image {
    int w, h;
    unsigned char *rgb; /* h * w * 3 */
} image;

typedef struct box {
    int x0, y0, x1, y1; /* page pixels, inclusive */
    float score;
} box;

typedef struct model_run {
    tdm_model *model;
    tdm_session *session;
} model_run;

static tdm_ctx *ctx;

static int fail(const char *what, const char *why)
{
    fprintf(stderr, "tandem-ocr: %s: %s\n", what, why && *why ? why : "failed");
    return 3;
}

/* ---- the page ---- */

static int ppm_token(FILE *f, char *buf, size_t n)
{
    int c;
    size_t k = 0;
    for (;;) {
        c = fgetc(f);
        if (c == '#') {
            while (c != '\n' && c != EOF)
                c = fgetc(f);
        } else if (!isspace(c)) {
            break;
        }
    }
    while (c != EOF && !isspace(c) && k + 1 < n) {
        buf[k++] = (char)c;
        c = fgetc(f);
    }
    buf[k] = 0;
    return k ? 0 : -1; /* the single whitespace after the token is consumed */
}

static int read_ppm(const char *path, image *im)
{
    char tok[32];
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "tandem-ocr: cannot open the page '%s'.\n", path);
        return 2;
    }
    int w = 0, h = 0, maxv = 0;
    if (ppm_token(f, tok, sizeof tok) || strcmp(tok, "P6") || ppm_token(f, tok, sizeof tok) ||
        (w = atoi(tok)) <= 0 || ppm_token(f, tok, sizeof tok) || (h = atoi(tok)) <= 0 ||
        ppm_token(f, tok, sizeof tok) || (maxv = atoi(tok)) != 255 || w > 16384 || h > 16384) {
        fprintf(stderr, "tandem-ocr: '%s' is not a binary PPM (P6, 8 bits, at most 16384 x 16384).\n", path);
        fclose(f);
        return 2;
    }
    im->w = w;
    im->h = h;
    im->rgb = malloc((size_t)w * h * 3);
    if (!im->rgb || fread(im->rgb, 3, (size_t)w * h, f) != (size_t)w * h) {
        fprintf(stderr, "tandem-ocr: '%s' ends before its %d x %d pixels.\n", path, w, h);
        fclose(f);
        free(im->rgb);
        im->rgb = NULL;
        return 2;
    }
    fclose(f);
    return 0;
}

/* The page region (x0, y0)-(x1, y1) (exclusive ends, may be fractional)
 * scaled bilinearly to out_w x out_h into the first fill_w columns of a
 * 3 x out_h x width planar float buffer, channels in BGR order (as PP-OCR
 * reads images), each value (v / 255 - mean[c]) / std[c]; the columns past
 * fill_w are 0. */
static void to_planes(const image *im, double x0, double y0, double x1, double y1, int out_h, int fill_w, int width,
                      const float mean[3], const float std[3], float *dst)
{
    double sx = (x1 - x0) / fill_w, sy = (y1 - y0) / out_h;
    for (int c = 0; c < 3; c++) {
        int src_c = 2 - c; /* B, G, R */
        float *plane = dst + (size_t)c * out_h * width;
        for (int y = 0; y < out_h; y++) {
            double fy = y0 + (y + 0.5) * sy - 0.5;
            if (fy < 0)
                fy = 0;
            if (fy > im->h - 1)
                fy = im->h - 1;
            int ya = (int)fy, yb = ya + 1 < im->h ? ya + 1 : ya;
            double wy = fy - ya;
            for (int x = 0; x < width; x++) {
                if (x >= fill_w) {
                    plane[(size_t)y * width + x] = 0.0f;
                    continue;
                }
                double fx = x0 + (x + 0.5) * sx - 0.5;
                if (fx < 0)
                    fx = 0;
                if (fx > im->w - 1)
                    fx = im->w - 1;
                int xa = (int)fx, xb = xa + 1 < im->w ? xa + 1 : xa;
                double wx = fx - xa;
                const unsigned char *p = im->rgb;
                double v = (1 - wy) * ((1 - wx) * p[((size_t)ya * im->w + xa) * 3 + src_c] +
                                       wx * p[((size_t)ya * im->w + xb) * 3 + src_c]) +
                           wy * ((1 - wx) * p[((size_t)yb * im->w + xa) * 3 + src_c] +
                                 wx * p[((size_t)yb * im->w + xb) * 3 + src_c]);
                plane[(size_t)y * width + x] = (float)((v / 255.0 - mean[c]) / std[c]);
            }
        }
    }
}

/* ---- sessions and what they tell ---- */

static int open_model(const char *path, const char *devices, const char *input, int rank, const int64_t *dims,
                      model_run *r)
{
    tdm_session_options *o = NULL;
    if (tdm_model_load(ctx, path, &r->model) != TDM_OK)
        return fail(path, tdm_ctx_error(ctx));
    if (tdm_session_options_create(&o) != TDM_OK || tdm_session_options_set_devices(o, devices) != TDM_OK ||
        tdm_session_options_set_shape(o, input, rank, dims) != TDM_OK) {
        tdm_session_options_destroy(o);
        return fail(path, "bad session options");
    }
    tdm_status st = tdm_session_create(ctx, r->model, o, &r->session);
    tdm_session_options_destroy(o);
    if (st != TDM_OK)
        return fail(path, tdm_ctx_error(ctx));
    return 0;
}

static void close_model(model_run *r)
{
    tdm_session_destroy(r->session);
    tdm_model_destroy(r->model);
}

static tdm_status run1(model_run *r, const tdm_tensor *in, tdm_tensor **out)
{
    const tdm_tensor *ins[1] = {in};
    return tdm_session_run(r->session, ins, out);
}

/* A number after "key": in a flat JSON object (the guard's record); -1 when
 * absent. Enough for this example's one use. */
static double json_number(const char *json, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = json ? strstr(json, pat) : NULL;
    return p ? strtod(p + strlen(pat), NULL) : -1.0;
}

typedef struct tally {
    const char *reason, *op;
    size_t n;
} tally;

/* Where the session's plan put the model, and why: one paragraph. */
static void tell_placement(const char *label, model_run *r)
{
    const tdm_plan *p = tdm_session_plan(r->session);
    tdm_plan_summary s;
    if (tdm_plan_get_summary(p, &s) != TDM_OK)
        return;
    printf("%s: %zu nodes on", label, s.nodes);
    for (size_t d = 0; d < tdm_plan_device_count(p); d++)
        printf("%s %s %zu", d ? "," : "", tdm_plan_device_name(p, d), tdm_plan_device_nodes(p, d));
    printf("; %zu partition%s", s.partitions, s.partitions == 1 ? "" : "s");
    if (s.estimated_ms >= 0)
        printf("; estimated %.1f ms%s", s.estimated_ms, s.modeled ? " (modeled)" : "");
    printf("\n");

    /* fallbacks: nodes not on the first device, by reason and op type */
    const char *first = tdm_plan_device_name(p, 0);
    size_t n = tdm_plan_node_count(p), nt = 0, rescued = 0;
    tally *t = calloc(n ? n : 1, sizeof *t);
    if (!t)
        return;
    for (size_t i = 0; i < n; i++) {
        const char *op, *dev, *reason;
        if (tdm_plan_node(p, i, NULL, &op, &dev, &reason, NULL) != TDM_OK)
            continue;
        if (!strcmp(reason, "RESCUED"))
            rescued++;
        if (!strcmp(dev, first))
            continue;
        size_t k = 0;
        while (k < nt && (strcmp(t[k].reason, reason) || strcmp(t[k].op, op)))
            k++;
        if (k == nt)
            t[nt++] = (tally){reason, op, 0};
        t[k].n++;
    }
    if (!nt) {
        printf("  nothing falls back from %s\n", first);
    } else {
        printf("  falls back from %s: %zu node%s\n", first, s.fallback_nodes, s.fallback_nodes == 1 ? "" : "s");
        for (size_t k = 0; k < nt; k++) {
            if (!t[k].n)
                continue;
            size_t total = 0;
            for (size_t j = k; j < nt; j++)
                if (!strcmp(t[j].reason, t[k].reason))
                    total += t[j].n;
            printf("    %-16s %4zu:", t[k].reason, total);
            const char *reason = t[k].reason;
            for (size_t j = k; j < nt; j++) {
                if (strcmp(t[j].reason, reason) || !t[j].n)
                    continue;
                printf(" %s %zu", t[j].op, t[j].n);
                t[j].n = 0;
            }
            printf("\n");
        }
    }
    free(t);
    if (tdm_plan_device_count(p) > 1)
        printf("  rescue: %zu node%s rewritten so that %s runs them (reason RESCUED)\n", rescued,
               rescued == 1 ? "" : "s", first);

    char *g = NULL;
    if (tdm_session_guard_json(r->session, &g) == TDM_OK && g) {
        if (json_number(g, "active") > 0 || strstr(g, "\"active\":true"))
            printf("  precision guard: %.0f check%s, %.0f breach%s, %.0f node%s moved to cpu\n",
                   json_number(g, "checks"), json_number(g, "checks") == 1 ? "" : "s", json_number(g, "breaches"),
                   json_number(g, "breaches") == 1 ? "" : "es", json_number(g, "moved_nodes"),
                   json_number(g, "moved_nodes") == 1 ? "" : "s");
        else
            printf("  precision guard: not needed (every device computes in float32)\n");
    }
    tdm_free(g);
}

static int save_ledger(const char *dir, const char *name, model_run *r)
{
    if (!dir)
        return 0;
    char path[4096], *json = NULL;
    snprintf(path, sizeof path, "%s/%s.ledger.json", dir, name);
    if (tdm_session_ledger_json(r->session, &json) != TDM_OK)
        return fail(name, tdm_session_error(r->session));
    FILE *f = fopen(path, "w");
    if (!f) {
        tdm_free(json);
        fprintf(stderr, "tandem-ocr: cannot write '%s'.\n", path);
        return 3;
    }
    fputs(json, f);
    int bad = fclose(f) != 0;
    tdm_free(json);
    if (bad) {
        fprintf(stderr, "tandem-ocr: cannot write '%s'.\n", path);
        return 3;
    }
    printf("  ledger: %s\n", path);
    return 0;
}

/* ---- detection ---- */

static int box_order(const void *a, const void *b)
{
    const box *p = a, *q = b;
    int pc = (p->y0 + p->y1) / 2, qc = (q->y0 + q->y1) / 2;
    int tol = (p->y1 - p->y0) / 2;
    if (abs(pc - qc) > tol)
        return pc < qc ? -1 : 1;
    return p->x0 < q->x0 ? -1 : p->x0 > q->x0;
}

/* Regions of prob > DET_THRESH (4-connected) with a mean probability of at
 * least DET_BOX_SCORE, grown by DB's unclip distance and scaled to the page. */
static int find_boxes(const float *prob, int mh, int mw, const image *im, box *out, int max)
{
    int *label = calloc((size_t)mh * mw, sizeof *label), *stack = malloc((size_t)mh * mw * sizeof *stack);
    int n = 0, next = 0;
    if (!label || !stack) {
        free(label);
        free(stack);
        return -1;
    }
    for (int i = 0; i < mh * mw; i++) {
        if (prob[i] <= DET_THRESH || label[i])
            continue;
        int top = 0, x0 = mw, y0 = mh, x1 = -1, y1 = -1, count = 0;
        double sum = 0;
        label[i] = ++next;
        stack[top++] = i;
        while (top) {
            int k = stack[--top], y = k / mw, x = k % mw;
            count++;
            sum += prob[k];
            x0 = x < x0 ? x : x0;
            x1 = x > x1 ? x : x1;
            y0 = y < y0 ? y : y0;
            y1 = y > y1 ? y : y1;
            int nb[4] = {y > 0 ? k - mw : -1, y < mh - 1 ? k + mw : -1, x > 0 ? k - 1 : -1, x < mw - 1 ? k + 1 : -1};
            for (int j = 0; j < 4; j++)
                if (nb[j] >= 0 && !label[nb[j]] && prob[nb[j]] > DET_THRESH) {
                    label[nb[j]] = next;
                    stack[top++] = nb[j];
                }
        }
        int bw = x1 - x0 + 1, bh = y1 - y0 + 1;
        if (count < 10 || bw < 3 || bh < 3 || sum / count < DET_BOX_SCORE || n == max)
            continue;
        double d = (double)bw * bh * DET_UNCLIP / (2.0 * (bw + bh));
        double sx = (double)im->w / mw, sy = (double)im->h / mh;
        box b;
        b.x0 = (int)floor((x0 - d) * sx);
        b.y0 = (int)floor((y0 - d) * sy);
        b.x1 = (int)ceil((x1 + 1 + d) * sx) - 1;
        b.y1 = (int)ceil((y1 + 1 + d) * sy) - 1;
        b.x0 = b.x0 < 0 ? 0 : b.x0;
        b.y0 = b.y0 < 0 ? 0 : b.y0;
        b.x1 = b.x1 >= im->w ? im->w - 1 : b.x1;
        b.y1 = b.y1 >= im->h ? im->h - 1 : b.y1;
        b.score = (float)(sum / count);
        out[n++] = b;
    }
    free(label);
    free(stack);
    qsort(out, (size_t)n, sizeof *out, box_order);
    return n;
}

/* ---- recognition ---- */

/* The recognizer's characters: index 0 is CTC's blank, then the lines of
 * the model's "character" metadata, then a space (PP-OCR's convention). */
typedef struct charset {
    char **c;
    size_t n;
} charset;

static char *copy_str(const char *s, size_t len)
{
    char *c = malloc(len + 1);
    if (c) {
        memcpy(c, s, len);
        c[len] = 0;
    }
    return c;
}

static int load_charset(const tdm_model *m, charset *cs)
{
    const char *list = NULL;
    for (size_t i = 0; i < tdm_model_metadata_count(m); i++) {
        const char *k, *v;
        if (tdm_model_metadata(m, i, &k, &v) == TDM_OK && !strcmp(k, "character"))
            list = v;
    }
    if (!list) {
        fprintf(stderr, "tandem-ocr: the recognizer has no \"character\" metadata (a PP-OCR rec model keeps its "
                        "character list there).\n");
        return 2;
    }
    size_t lines = 1;
    for (const char *p = list; *p; p++)
        lines += *p == '\n';
    cs->c = calloc(lines + 2, sizeof *cs->c);
    if (!cs->c)
        return 3;
    if (!(cs->c[cs->n++] = copy_str("", 0)))
        return 3;
    for (const char *p = list; *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (!(cs->c[cs->n++] = copy_str(p, len)))
            return 3;
        p += len + (e ? 1 : 0);
    }
    return (cs->c[cs->n++] = copy_str(" ", 1)) ? 0 : 3;
}

static void free_charset(charset *cs)
{
    for (size_t i = 0; i < cs->n; i++)
        free(cs->c[i]);
    free(cs->c);
}

/* Greedy CTC: the best class per step, repeats merged, blanks dropped. */
static int ctc_decode(const tdm_tensor *probs, const charset *cs, char *text, size_t size)
{
    const int64_t *d = tdm_tensor_dims(probs);
    if (tdm_tensor_rank(probs) != 3 || tdm_tensor_dtype(probs) != TDM_FLOAT || (size_t)d[2] != cs->n) {
        fprintf(stderr, "tandem-ocr: the recognizer's output is not 1 x T x %zu float scores.\n", cs->n);
        return 2;
    }
    const float *p = tdm_tensor_cdata(probs);
    size_t len = 0, prev = 0;
    text[0] = 0;
    for (int64_t t = 0; t < d[1]; t++) {
        const float *row = p + (size_t)t * d[2];
        size_t best = 0;
        for (size_t k = 1; k < (size_t)d[2]; k++)
            if (row[k] > row[best])
                best = k;
        if (best != prev && best != 0) {
            size_t l = strlen(cs->c[best]);
            if (len + l + 1 < size) {
                memcpy(text + len, cs->c[best], l + 1);
                len += l;
            }
        }
        prev = best;
    }
    /* trailing spaces are padding, not text */
    while (len && text[len - 1] == ' ')
        text[--len] = 0;
    return 0;
}

/* ---- the pipeline ---- */

typedef struct reading {
    box boxes[MAX_BOXES];
    char text[MAX_BOXES][256];
    int n;
} reading;

static int read_page(const image *im, const char *det_path, const char *rec_path, const char *devices,
                     const char *ledger_dir, const char *tag, reading *out)
{
    static const float det_mean[3] = {0.485f, 0.456f, 0.406f}, det_std[3] = {0.229f, 0.224f, 0.225f};
    static const float rec_mean[3] = {0.5f, 0.5f, 0.5f}, rec_std[3] = {0.5f, 0.5f, 0.5f};
    int rc = 0;
    double scale = (double)DET_LIMIT / (im->w > im->h ? im->w : im->h);
    scale = scale > 1 ? 1 : scale;
    int th = (int)lround(im->h * scale / 32) * 32, tw = (int)lround(im->w * scale / 32) * 32;
    th = th < 32 ? 32 : th;
    tw = tw < 32 ? 32 : tw;

    model_run det = {0}, rec = {0};
    charset cs = {0};
    tdm_tensor *x = NULL, *prob = NULL, *line = NULL, *scores = NULL;
    int64_t dd[4] = {1, 3, th, tw}, rd[4] = {1, 3, REC_H, REC_W};
    char label[64];

    if ((rc = open_model(det_path, devices, "x", 4, dd, &det)) || (rc = open_model(rec_path, devices, "x", 4, rd, &rec)) ||
        (rc = load_charset(rec.model, &cs)))
        goto done;
    if (tdm_tensor_create(TDM_FLOAT, 4, dd, &x) != TDM_OK || tdm_tensor_create(TDM_FLOAT, 4, rd, &line) != TDM_OK) {
        rc = fail("tensors", "out of memory");
        goto done;
    }
    to_planes(im, 0, 0, im->w, im->h, th, tw, tw, det_mean, det_std, tdm_tensor_data(x));
    if (ledger_dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/det-input.npy", ledger_dir);
        if (tdm_tensor_save_npy(ctx, x, path, 1) != TDM_OK) {
            rc = fail(path, tdm_ctx_error(ctx));
            goto done;
        }
    }
    if (run1(&det, x, &prob) != TDM_OK) {
        rc = fail("det", tdm_session_error(det.session));
        goto done;
    }
    const int64_t *pd = tdm_tensor_dims(prob);
    if (tdm_tensor_rank(prob) != 4 || pd[2] != th || pd[3] != tw || tdm_tensor_dtype(prob) != TDM_FLOAT) {
        rc = fail("det", "the detector's output is not a 1 x 1 x H x W float map of its input's size");
        goto done;
    }
    out->n = find_boxes(tdm_tensor_cdata(prob), th, tw, im, out->boxes, MAX_BOXES);
    if (out->n < 0) {
        rc = fail("det", "out of memory");
        goto done;
    }
    for (int i = 0; i < out->n; i++) {
        const box *b = &out->boxes[i];
        int bw = b->x1 - b->x0 + 1, bh = b->y1 - b->y0 + 1;
        int fill = (int)ceil((double)REC_H * bw / bh);
        fill = fill > REC_W ? REC_W : fill < 1 ? 1 : fill;
        to_planes(im, b->x0, b->y0, b->x1 + 1, b->y1 + 1, REC_H, fill, REC_W, rec_mean, rec_std, tdm_tensor_data(line));
        if (run1(&rec, line, &scores) != TDM_OK) {
            rc = fail("rec", tdm_session_error(rec.session));
            goto done;
        }
        if ((rc = ctc_decode(scores, &cs, out->text[i], sizeof out->text[i])))
            goto done;
        tdm_tensor_destroy(scores);
        scores = NULL;
    }
    snprintf(label, sizeof label, "det on %s", devices);
    tell_placement(label, &det);
    snprintf(label, sizeof label, "%s-det", tag);
    if ((rc = save_ledger(ledger_dir, label, &det)))
        goto done;
    snprintf(label, sizeof label, "rec on %s", devices);
    tell_placement(label, &rec);
    snprintf(label, sizeof label, "%s-rec", tag);
    rc = save_ledger(ledger_dir, label, &rec);
done:
    tdm_tensor_destroy(x);
    tdm_tensor_destroy(prob);
    tdm_tensor_destroy(line);
    tdm_tensor_destroy(scores);
    free_charset(&cs);
    close_model(&det);
    close_model(&rec);
    return rc;
}

static void print_reading(const reading *r)
{
    printf("  %d text box%s:\n", r->n, r->n == 1 ? "" : "es");
    for (int i = 0; i < r->n; i++)
        printf("    [%4d,%4d %4dx%-3d] %s\n", r->boxes[i].x0, r->boxes[i].y0, r->boxes[i].x1 - r->boxes[i].x0 + 1,
               r->boxes[i].y1 - r->boxes[i].y0 + 1, r->text[i]);
}

/* Lines of the --expect file that the reading lacks (each line read at most
 * once); prints them and returns how many. */
static int check_expected(const char *path, const reading *r)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "tandem-ocr: cannot open '%s'.\n", path);
        return -1;
    }
    char want[512];
    int used[MAX_BOXES] = {0}, missing = 0, lines = 0;
    while (fgets(want, sizeof want, f)) {
        want[strcspn(want, "\r\n")] = 0;
        if (!*want)
            continue;
        lines++;
        int k = 0;
        while (k < r->n && (used[k] || strcmp(r->text[k], want)))
            k++;
        if (k < r->n) {
            used[k] = 1;
        } else {
            printf("  not read: \"%s\"\n", want);
            missing++;
        }
    }
    fclose(f);
    printf("  %d of %d expected line%s read exactly\n", lines - missing, lines, lines == 1 ? "" : "s");
    return missing;
}

static int usage(void)
{
    fprintf(stderr, "usage: tandem-ocr PAGE.ppm DET.onnx REC.onnx [--devices LIST] [--expect FILE] [--ledger-dir DIR]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *page = NULL, *det = NULL, *rec = NULL, *devices = "vnpu:rk3588,cpu", *expect = NULL,
               *ledger_dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--devices") && i + 1 < argc)
            devices = argv[++i];
        else if (!strcmp(argv[i], "--expect") && i + 1 < argc)
            expect = argv[++i];
        else if (!strcmp(argv[i], "--ledger-dir") && i + 1 < argc)
            ledger_dir = argv[++i];
        else if (argv[i][0] == '-' || (page && det && rec)) {
            return usage();
        } else if (!page)
            page = argv[i];
        else if (!det)
            det = argv[i];
        else
            rec = argv[i];
    }
    if (!rec) {
        return usage();
    }
    image im = {0};
    int rc = read_ppm(page, &im);
    if (rc)
        return rc;
    if (tdm_ctx_create(&ctx) != TDM_OK) {
        free(im.rgb);
        return fail("tandem", "cannot create a context");
    }
    static reading dev, cpu;
    printf("page %s: %d x %d\n\n", page, im.w, im.h);
    rc = read_page(&im, det, rec, devices, ledger_dir, "device", &dev);
    if (!rc) {
        print_reading(&dev);
        printf("\n");
        rc = read_page(&im, det, rec, "cpu", NULL, "cpu", &cpu);
    }
    if (!rc) {
        print_reading(&cpu);
        int same = dev.n == cpu.n;
        for (int i = 0; same && i < dev.n; i++)
            same = !strcmp(dev.text[i], cpu.text[i]);
        printf("\n%s and cpu %s\n", devices, same ? "read the same text" : "read DIFFERENT text");
        if (expect) {
            int m = check_expected(expect, &dev);
            rc = m < 0 ? 2 : m > 0 || !same ? 1 : 0;
        }
    }
    tdm_ctx_destroy(ctx);
    free(im.rgb);
    return rc;
}
