/* Shape bucketing (issue 18, static shapes): a dynamic-size image input is
 * padded to the smallest allowed height x width that contains it (bottom
 * and right, zeros or the edge pixel), the plan specialised to that bucket
 * runs, and the outputs whose last two axes follow the input's (output
 * H = bucket H / s, the same s for W) are cropped back to the region the
 * real input covers (ceil(H / s) x ceil(W / s)).
 *
 * Only fully convolutional graphs are bucketed (bucket_check): every node
 * on a path from an image input is local in space (Conv, ConvTranspose,
 * pools, BatchNormalization, activations, elementwise arithmetic, Resize
 * by scales, Concat on channels; not Pad, DepthToSpace or SpaceToDepth,
 * which move or rescale the region). A GlobalAveragePool is tolerated only
 * as a channel gate (squeeze-and-excitation): its result, after
 * channel-wise ops, multiplies or adds back onto a spatial map
 * (bucket_mask_model takes its mean over the real region). Any other
 * consumer of a reduced value (Flatten, Reshape, Gemm, MatMul, a graph
 * output) or any other op on a spatial path refuses with a
 * SHAPE_UNSUPPORTED sentence naming it. Near the image's bottom and right
 * edges a MaxPool sees the mask's zeros where an unpadded run sees -inf,
 * and an AveragePool with count_include_pad 0 counts them. */
#ifndef TDM_RUN_BUCKET_H
#define TDM_RUN_BUCKET_H

#include "core/err.h"
#include "graph/graph.h"

#include <stddef.h>
#include <stdint.h>

typedef struct bucket_shape {
    int64_t h, w;
} bucket_shape;

enum { BUCKET_PAD_ZERO = 0, BUCKET_PAD_EDGE = 1 };

/* "640x640,960x960" (heights x widths, 1 to 65536, at most 64 shapes):
 * *out (mem_alloc) sorted by area, *n their count. */
tdm_status bucket_parse(tdm_err *e, const char *spec, bucket_shape **out, size_t *n);

/* TDM_OK when g may be bucketed; *n_gates (may be NULL) gets the count of
 * global reductions used as channel gates (approximate under padding).
 * Otherwise TDM_E_UNSUPPORTED with a sentence naming the op and node. */
tdm_status bucket_check(tdm_err *e, const gr_graph *g, int *n_gates);

/* The smallest shape of b[0..n) (by area) holding h x w; -1: none. */
int bucket_pick(const bucket_shape *b, size_t n, int64_t h, int64_t w);

/* A new rank-4 float tensor of in (N, C, h, w) padded to bh x bw. */
tdm_status bucket_pad(tdm_err *e, const tdm_tensor *in, int64_t bh, int64_t bw, int mode, tdm_tensor **out);

/* Output t (last two axes bh/s x bw/s) cropped to ceil(h/s) x ceil(w/s):
 * a new tensor in *out, or TDM_E_RUNTIME when its last two axes do not
 * follow the bucket. */
tdm_status bucket_crop(tdm_err *e, const tdm_tensor *t, int64_t bh, int64_t bw, int64_t h, int64_t w,
                       tdm_tensor **out);

/* The model m with an extra input "bucket_mask" (1 x 1 x H x W of the
 * image: 1 on the real region, 0 on the padding) multiplied into the input
 * of every Conv, ConvTranspose and pool at that op's stride (a Slice of the
 * mask with steps s), and every GlobalAveragePool's mean taken over the
 * real region (GAP(X * M) / GAP(M)): with the padding bottom/right and the
 * image a multiple of the model's largest stride, the cropped outputs equal
 * an unpadded run's. A new model in *out. */
struct tdm_model;
tdm_status bucket_mask_model(tdm_err *e, const struct tdm_model *m, struct tdm_model **out);

/* A session's bucketing: the shapes, the pad mode and its figures. */
typedef struct bucket_state {
    bucket_shape *shapes;  /* sorted by area; NULL: bucketing off */
    size_t n;
    int pad;               /* BUCKET_PAD_* */
    int gates;             /* global reductions used as channel gates (approximate under padding) */
    uint64_t runs, padded; /* runs seen, runs padded */
    int64_t h, w, bh, bw;  /* the last padded run: the image and its bucket */
    int64_t ch, cw;        /* ... and the first cropped output's last two axes */
} bucket_state;

/* One run: the image's size and the bucket it was padded to. */
typedef struct bucket_run {
    int64_t h, w, bh, bw;
    int padded;            /* 0: the image is a bucket already (nothing to crop) */
    int64_t ch, cw;
} bucket_run;

/* Parses spec (pad: "zero", "edge" or NULL) and checks g into b. */
tdm_status bucket_init(tdm_err *e, bucket_state *b, const char *spec, const char *pad, const gr_graph *g);
void bucket_free(bucket_state *b);

/* The rank-4 tensors of in[0..n) padded to the bucket (padded[k] new, or
 * NULL where in[k] is kept); TDM_E_INPUT when the images differ in size
 * or no bucket holds them. */
tdm_status bucket_inputs(tdm_err *e, const bucket_state *b, const tdm_tensor *const *in, size_t n,
                         tdm_tensor **padded, bucket_run *r);
/* The mask input of run r: 1 x 1 x bh x bw, 1 on the image's h x w. */
tdm_status bucket_mask(tdm_err *e, const bucket_run *r, tdm_tensor **out);
/* Crops out[0..n) in place (the originals destroyed) after a padded run. */
tdm_status bucket_outputs(tdm_err *e, bucket_run *r, tdm_tensor **out, size_t n);
/* Counts run r into b (the caller holds the session lock). */
void bucket_note(bucket_state *b, const bucket_run *r);
/* The ledger's "bucket" object (cJSON *), NULL when off or out of memory. */
void *bucket_json(const bucket_state *b);

#endif
