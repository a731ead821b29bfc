/* Run and infer hooks of the ai.onnx.ml operators (see ml.def), computed
 * as onnxruntime computes them (its CPU kernels are the reference the
 * exported pipelines were checked against). */
#ifndef TDM_OPS_ML_H
#define TDM_OPS_ML_H

#include "ops/op.h"

/* The element types the numeric ml kernels take as X. */
#define DT_ML_NUM (DT_BIT(TDM_FLOAT) | DT_BIT(TDM_DOUBLE) | DT_BIT(TDM_INT64) | DT_BIT(TDM_INT32))

/* post_transform of the classifiers and regressors; the numbers are
 * TreeEnsemble's (ai.onnx.ml 5) integer attribute. */
typedef enum ml_post {
    ML_POST_NONE = 0,
    ML_POST_SOFTMAX = 1,
    ML_POST_LOGISTIC = 2,
    ML_POST_SOFTMAX_ZERO = 3,
    ML_POST_PROBIT = 4
} ml_post;

/* ml_linear.c */
tdm_status op_run_LinearClassifier(op_ctx *ctx);
tdm_status op_run_LinearRegressor(op_ctx *ctx);
tdm_status op_run_Normalizer(op_ctx *ctx);
tdm_status op_run_Scaler(op_ctx *ctx);
tdm_status op_infer_ml_classifier(op_infer_ctx *ctx);
tdm_status op_infer_LinearRegressor(op_infer_ctx *ctx);
tdm_status op_infer_ml_float_same(op_infer_ctx *ctx);

/* ml_encode.c */
tdm_status op_run_Binarizer(op_ctx *ctx);
tdm_status op_run_Imputer(op_ctx *ctx);
tdm_status op_run_ArrayFeatureExtractor(op_ctx *ctx);
tdm_status op_infer_ArrayFeatureExtractor(op_infer_ctx *ctx);
tdm_status op_run_LabelEncoder(op_ctx *ctx);
tdm_status op_infer_LabelEncoder(op_infer_ctx *ctx);
tdm_status op_run_CategoryMapper(op_ctx *ctx);
tdm_status op_infer_CategoryMapper(op_infer_ctx *ctx);
tdm_status op_run_OneHotEncoder(op_ctx *ctx);
tdm_status op_infer_OneHotEncoder(op_infer_ctx *ctx);

/* ml_tree.c */
tdm_status op_run_TreeEnsembleClassifier(op_ctx *ctx);
tdm_status op_run_TreeEnsembleRegressor(op_ctx *ctx);
tdm_status op_infer_TreeEnsembleRegressor(op_infer_ctx *ctx);
tdm_status op_run_TreeEnsemble(op_ctx *ctx);
tdm_status op_infer_TreeEnsemble(op_infer_ctx *ctx);

/* ml_zipmap.c */
tdm_status op_run_ZipMap(op_ctx *ctx);
tdm_status op_infer_ZipMap(op_infer_ctx *ctx);

/* ---- shared by the ml kernels (ml_linear.c) ---- */

/* The post_transform attribute (a string before ai.onnx.ml 5); fails with
 * a sentence naming an unknown one. */
tdm_status ml_post_attr(op_ctx *ctx, ml_post *out);
/* Applies post to the n scores of one row in place, in float as
 * onnxruntime does (n >= 2: every score; SOFTMAX and SOFTMAX_ZERO over the row). */
void ml_post_row(ml_post post, float *s, size_t n);
float ml_logistic(float v);
float ml_probit(float v);
/* X as rows: 1-D X is one row; otherwise N = dims[0], C = the rest. Fails
 * with a sentence for a scalar or a non-tensor. */
tdm_status ml_rows(op_ctx *ctx, const tdm_tensor *x, int64_t *n, int64_t *c);
/* The class labels: classlabels_ints / classlabels_int64s (*ints) or
 * classlabels_strings (*strs); *n the count (0 when neither). */
void ml_labels(const gr_node *node, const char *ints_name, const int64_t **ints, char *const **strs, size_t *n);
/* Writes label k of the node's labels into Y[i] (int64 or string). */
tdm_status ml_put_label(op_ctx *ctx, tdm_tensor *y, size_t i, const int64_t *ints, char *const *strs, int64_t k);
/* Output o of an infer hook as [rows of X, cols] of type dt (1-D X: one row). */
void ml_infer_rows(op_infer_ctx *ctx, gr_type *o, tdm_dtype dt, int64_t cols);
/* A string-list attribute: count and *vals, or -1 when absent. */
int ml_attr_strings(const gr_node *n, const char *name, char *const **vals);

#endif
