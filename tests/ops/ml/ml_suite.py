#!/usr/bin/env python3
"""ai.onnx.ml operators through the CLI against onnxruntime.

Writes one-node models (onnx.helper) covering each operator's attributes
with seeded, realistic data: linear models, normalisers and scalers, the
encoders, tree ensembles shaped like exported random forests and gradient
boosting (every node mode, missing values tracked either way, base values,
all aggregate functions and post transforms, *_as_tensor forms, float and
double inputs) and TreeEnsemble of ai.onnx.ml 5 with set membership. Runs
onnxruntime on each for the expected outputs, then

    tandem run MODEL --input NAME=FILE.pb ... --output-dir D --output-format pb

and compares: labels and integers exactly, strings exactly, floats within
1e-5 relative (plus 1e-6 absolute for values near 0). ZipMap's sequences
of maps (onnxruntime: a list of dicts) are read from the npy form instead
(--output-dir D without pb: D/NAME/J/keys.npy and values.npy), keys exactly
and in onnxruntime's order. Also checks that `tandem info` and `tandem plan`
work on a classifier and that a model taking a map (DictVectorizer) is
refused at load with one sentence.

Usage: ml_suite.py --tandem BIN --out DIR [-k NAME]...
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ML = "ai.onnx.ml"
RTOL, ATOL = 1e-5, 1e-6
CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def ttype(arr):
    if arr.dtype == np.float32:
        return TensorProto.FLOAT
    if arr.dtype == np.float64:
        return TensorProto.DOUBLE
    if arr.dtype == np.int64:
        return TensorProto.INT64
    if arr.dtype == np.int32:
        return TensorProto.INT32
    if arr.dtype == np.int16:
        return TensorProto.INT16
    if arr.dtype.kind in "OU":
        return TensorProto.STRING
    raise ValueError(arr.dtype)


def model(op, inputs, outputs, ml_opset=3, extra=None, **attrs):
    """One node of op; inputs: list of (name, array); outputs: list of
    (name, None): their types are inferred."""
    node = helper.make_node(op, [n for n, _ in inputs], [n for n, _ in outputs], domain=ML, **attrs)
    ins = [helper.make_tensor_value_info(n, ttype(a), list(a.shape)) for n, a in inputs]
    outs = [onnx.ValueInfoProto(name=n) for n, _ in outputs]
    g = helper.make_graph([node] + (extra or []), op.lower(), ins, outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, ml_opset)],
                          producer_name="tandem-ml-suite")
    m.ir_version = 8 if ml_opset < 4 else 10
    # the outputs' element types from onnx's inference; their shapes left
    # out (onnx infers some of them wrong, e.g. a classifier's scores)
    inferred = onnx.shape_inference.infer_shapes(m)
    for k, (o, i) in enumerate(zip(m.graph.output, inferred.graph.output)):
        et = i.type.tensor_type.elem_type
        if not et:  # onnx infers no type: the operator's documented one
            if op in ("Imputer", "Binarizer"):
                et = ttype(inputs[0][1])
            elif k == 0 and op.endswith("Classifier"):
                et = TensorProto.STRING if "classlabels_strings" in attrs else TensorProto.INT64
            else:
                et = TensorProto.FLOAT
        o.type.tensor_type.elem_type = et
        for k in range(len(i.type.tensor_type.shape.dim)):
            o.type.tensor_type.shape.dim.add().dim_param = "%s_%d" % (o.name, k)
    return m


# ----------------------------------------------------------------- data

RNG = np.random.default_rng(20261204)


def features(n, c, dtype=np.float32, nan_frac=0.0):
    x = RNG.normal(0.0, 1.0, (n, c)) * np.linspace(0.5, 3.0, c) + np.linspace(-1.0, 2.0, c)
    if nan_frac:
        x[RNG.random((n, c)) < nan_frac] = np.nan
    return x.astype(dtype)


MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]


def random_forest(x, n_trees, depth, n_out, modes=("BRANCH_LEQ",), weights="positive", miss=False,
                  eq_values=None):
    """Trees in the node-list form of ai.onnx.ml 1-3, thresholds from the
    data's quantiles. Returns a dict of lists. Leaves carry one weight per
    output for n_out > 1 (multi-target / per class) or one weight."""
    t = {k: [] for k in ("treeids", "nodeids", "featureids", "modes", "values", "true", "false", "miss")}
    w = {k: [] for k in ("treeids", "nodeids", "ids", "weights")}
    finite = np.where(np.isnan(x), 0, x)
    for tree in range(n_trees):
        counter = [0]

        def grow(level):
            nid = counter[0]
            counter[0] += 1
            t["treeids"].append(tree)
            t["nodeids"].append(nid)
            if level == depth or (level >= 2 and RNG.random() < 0.2):
                t["featureids"].append(0)
                t["modes"].append("LEAF")
                t["values"].append(0.0)
                t["true"].append(0)
                t["false"].append(0)
                t["miss"].append(0)
                outs = range(n_out) if n_out > 1 and weights != "one" else [0 if weights != "class1" else 1]
                for o in outs:
                    w["treeids"].append(tree)
                    w["nodeids"].append(nid)
                    w["ids"].append(o)
                    if weights == "positive" or weights == "class1":
                        v = float(RNG.random())
                    elif weights == "low":  # probabilities away from 0.5
                        v = float(RNG.uniform(0.05, 0.3))
                    else:
                        v = float(RNG.normal(0, 1.5))
                    w["weights"].append(round(v, 4))
                return nid
            f = int(RNG.integers(0, x.shape[1]))
            mode = modes[int(RNG.integers(0, len(modes)))]
            if mode in ("BRANCH_EQ", "BRANCH_NEQ") and eq_values is not None:
                th = float(eq_values[int(RNG.integers(0, len(eq_values)))])
            else:
                th = float(np.quantile(finite[:, f], RNG.uniform(0.2, 0.8)))
            at = len(t["modes"])
            t["featureids"].append(f)
            t["modes"].append(mode)
            t["values"].append(np.float32(th).item())
            t["true"].append(0)
            t["false"].append(0)
            t["miss"].append(int(miss and RNG.random() < 0.5))
            tn = grow(level + 1)
            fn = grow(level + 1)
            t["true"][at] = tn
            t["false"][at] = fn
            return nid

        grow(0)
    return t, w


def tree_attrs(t, w, prefix, as_tensor=None, miss=True):
    """as_tensor: None (float lists) or the numpy type of the *_as_tensor
    forms (onnxruntime takes them in X's type)."""
    a = dict(nodes_treeids=t["treeids"], nodes_nodeids=t["nodeids"], nodes_featureids=t["featureids"],
             nodes_modes=t["modes"], nodes_truenodeids=t["true"], nodes_falsenodeids=t["false"])
    if miss:
        a["nodes_missing_value_tracks_true"] = t["miss"]
    a[prefix + "_treeids"] = w["treeids"]
    a[prefix + "_nodeids"] = w["nodeids"]
    a[prefix + "_ids"] = w["ids"]
    if as_tensor:
        a["nodes_values_as_tensor"] = numpy_helper.from_array(np.array(t["values"], as_tensor), "v")
        a[prefix + "_weights_as_tensor"] = numpy_helper.from_array(np.array(w["weights"], as_tensor), "w")
    else:
        a["nodes_values"] = t["values"]
        a[prefix + "_weights"] = w["weights"]
    return a


# ---------------------------------------------------------------- cases

POSTS = ["NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"]


@case
def linear_classifier():
    out = []
    x = features(16, 4)
    coef = RNG.normal(0, 0.8, (3, 4)).astype(np.float32)
    icpt = RNG.normal(0, 0.5, 3).astype(np.float32)
    for post in POSTS:
        # PROBIT: scores away from 0.5, where onnxruntime's float formula
        # (erfinv of 2s - 1 by Winitzki's approximation) loses its digits
        c, b = (coef * 0.02, np.array([0.2, 0.75, 0.85], np.float32)) if post == "PROBIT" else (coef, icpt)
        out.append(("linclass_multi_" + post.lower(),
                    model("LinearClassifier", [("X", x)], [("label", None), ("probabilities", None)],
                          ml_opset=1, coefficients=c.ravel().tolist(), intercepts=b.tolist(),
                          classlabels_ints=[3, 7, 11], post_transform=post), {"X": x}))
    out.append(("linclass_multi_strings",
                model("LinearClassifier", [("X", x)], [("label", None), ("probabilities", None)], ml_opset=1,
                      coefficients=coef.ravel().tolist(), intercepts=icpt.tolist(),
                      classlabels_strings=["setosa", "versicolor", "virginica"], post_transform="SOFTMAX"),
                {"X": x}))
    x1 = x[2].copy()
    out.append(("linclass_1d", model("LinearClassifier", [("X", x1)], [("label", None), ("probabilities", None)],
                                     ml_opset=1, coefficients=coef.ravel().tolist(), intercepts=icpt.tolist(),
                                     classlabels_ints=[0, 1, 2], post_transform="SOFTMAX"), {"X": x1}))
    xd = features(9, 4, np.float64)
    out.append(("linclass_multi_double",
                model("LinearClassifier", [("X", xd)], [("label", None), ("probabilities", None)], ml_opset=1,
                      coefficients=coef.ravel().tolist(), intercepts=icpt.tolist(), classlabels_ints=[0, 1, 2],
                      post_transform="LOGISTIC"), {"X": xd}))
    xi = RNG.integers(-5, 6, (7, 4)).astype(np.int64)
    out.append(("linclass_multi_int64",
                model("LinearClassifier", [("X", xi)], [("label", None), ("probabilities", None)], ml_opset=1,
                      coefficients=coef.ravel().tolist(), intercepts=icpt.tolist(), classlabels_ints=[0, 1, 2]),
                {"X": xi}))
    # binary: one row of coefficients (LogisticRegression on two classes)
    # (binary PROBIT left out: onnxruntime 1.31.1 writes its scores to the
    # wrong places, zeros in the second half of the rows)
    for post in POSTS[:4]:
        for labels in (dict(classlabels_ints=[0, 1]), dict(classlabels_strings=["no", "yes"])):
            kind = "ints" if "classlabels_ints" in labels else "strings"
            out.append(("linclass_binary_%s_%s" % (post.lower(), kind),
                        model("LinearClassifier", [("X", x)], [("label", None), ("probabilities", None)],
                              ml_opset=1, coefficients=(coef[0] * (0.02 if post == "PROBIT" else 1)).tolist(),
                              intercepts=[0.8 if post == "PROBIT" else float(icpt[0])],
                              post_transform=post, **labels), {"X": x}))
    return out


@case
def linear_regressor():
    x = features(12, 5)
    xd = features(6, 5, np.float64)
    c1 = RNG.normal(0, 1, 5).astype(np.float32)
    c3 = RNG.normal(0, 1, (3, 5)).astype(np.float32)
    return [
        ("linreg_1", model("LinearRegressor", [("X", x)], [("variable", None)], ml_opset=1,
                           coefficients=c1.tolist(), intercepts=[0.25]), {"X": x}),
        ("linreg_3", model("LinearRegressor", [("X", x)], [("variable", None)], ml_opset=1,
                           coefficients=c3.ravel().tolist(), intercepts=[0.1, -0.2, 0.3], targets=3), {"X": x}),
        ("linreg_3_softmax", model("LinearRegressor", [("X", x)], [("variable", None)], ml_opset=1,
                                   coefficients=c3.ravel().tolist(), targets=3, post_transform="SOFTMAX"), {"X": x}),
        ("linreg_1_logistic", model("LinearRegressor", [("X", x)], [("variable", None)], ml_opset=1,
                                    coefficients=c1.tolist(), post_transform="LOGISTIC"), {"X": x}),
        # (onnxruntime has no double LinearRegressor: no double case)
        ("linreg_3_rows1", model("LinearRegressor", [("X", xd[:1].astype(np.float32))], [("variable", None)],
                                 ml_opset=1, coefficients=c3.ravel().tolist(), targets=3),
         {"X": xd[:1].astype(np.float32)}),
    ]


@case
def normalizer_scaler():
    x = features(10, 6)
    x[3] = 0.0
    xd = features(5, 6, np.float64)
    xi = RNG.integers(-20, 20, (4, 6)).astype(np.int64)
    out = []
    for norm in ("MAX", "L1", "L2"):
        out.append(("normalizer_" + norm.lower(),
                    model("Normalizer", [("X", x)], [("Y", None)], ml_opset=1, norm=norm), {"X": x}))
        out.append(("normalizer_%s_double" % norm.lower(),
                    model("Normalizer", [("X", xd)], [("Y", None)], ml_opset=1, norm=norm), {"X": xd}))
    off = RNG.normal(0, 1, 6).astype(np.float32).tolist()
    sc = RNG.uniform(0.2, 2.0, 6).astype(np.float32).tolist()
    x1 = x[1].copy()
    out += [
        ("normalizer_l2_1d", model("Normalizer", [("X", x1)], [("Y", None)], ml_opset=1, norm="L2"), {"X": x1}),
        ("scaler_1d", model("Scaler", [("X", x1)], [("Y", None)], ml_opset=1, offset=[0.5], scale=[2.0]), {"X": x1}),
        ("scaler_columns", model("Scaler", [("X", x)], [("Y", None)], ml_opset=1, offset=off, scale=sc), {"X": x}),
        ("scaler_broadcast", model("Scaler", [("X", x)], [("Y", None)], ml_opset=1, offset=[0.5], scale=[2.0]),
         {"X": x}),
        ("scaler_double", model("Scaler", [("X", xd)], [("Y", None)], ml_opset=1, offset=off, scale=sc),
         {"X": xd}),
        ("scaler_int64", model("Scaler", [("X", xi)], [("Y", None)], ml_opset=1, offset=off, scale=sc),
         {"X": xi}),
    ]
    return out


@case
def encoders():
    x = features(8, 5)
    xn = features(8, 5, nan_frac=0.2)
    xi = RNG.integers(0, 6, (8, 5)).astype(np.int64)
    words = np.array([["red", "green", "blue", "cyan"], ["blue", "teal", "red", "red"]], dtype=object)
    idx = np.array([4, 0, 2], np.int64)
    cats = ["red", "green", "blue"]
    return [
        ("binarizer", model("Binarizer", [("X", x)], [("Y", None)], ml_opset=1, threshold=0.3), {"X": x}),
        ("imputer_nan", model("Imputer", [("X", xn)], [("Y", None)], ml_opset=1,
                              imputed_value_floats=[0.5, 1.5, -1.0, 2.0, 0.0], replaced_value_float=float("nan")),
         {"X": xn}),
        ("imputer_int64", model("Imputer", [("X", xi)], [("Y", None)], ml_opset=1, imputed_value_int64s=[-1],
                                replaced_value_int64=3), {"X": xi}),
        ("array_feature_extractor", model("ArrayFeatureExtractor", [("X", x), ("Y", idx)], [("Z", None)],
                                          ml_opset=1), {"X": x, "Y": idx}),
        ("array_feature_extractor_strings", model("ArrayFeatureExtractor", [("X", words), ("Y", idx[1:])],
                                                  [("Z", None)], ml_opset=1), {"X": words, "Y": idx[1:]}),
        ("onehot_strings", model("OneHotEncoder", [("X", words)], [("Y", None)], ml_opset=1, cats_strings=cats),
         {"X": words}),
        ("onehot_int64", model("OneHotEncoder", [("X", xi)], [("Y", None)], ml_opset=1, cats_int64s=[1, 2, 5]),
         {"X": xi}),
        ("category_mapper_s2i", model("CategoryMapper", [("X", words)], [("Y", None)], ml_opset=1,
                                      cats_strings=cats, cats_int64s=[10, 20, 30], default_int64=-7),
         {"X": words}),
        ("category_mapper_i2s", model("CategoryMapper", [("X", xi)], [("Y", None)], ml_opset=1,
                                      cats_strings=cats, cats_int64s=[1, 2, 3], default_string="other"),
         {"X": xi}),
        ("label_encoder_v1_s2i", model("LabelEncoder", [("X", words)], [("Y", None)], ml_opset=1,
                                       classes_strings=cats, default_int64=-9), {"X": words}),
        ("label_encoder_v1_i2s", model("LabelEncoder", [("X", xi)], [("Y", None)], ml_opset=1,
                                       classes_strings=cats, default_string="none"), {"X": xi}),
        ("label_encoder_s2i", model("LabelEncoder", [("X", words)], [("Y", None)], ml_opset=2,
                                    keys_strings=cats, values_int64s=[0, 1, 2], default_int64=99), {"X": words}),
        ("label_encoder_i2s", model("LabelEncoder", [("X", xi)], [("Y", None)], ml_opset=2,
                                    keys_int64s=[0, 1, 2, 3], values_strings=["a", "b", "c", "d"]), {"X": xi}),
        ("label_encoder_f2f", model("LabelEncoder", [("X", xi.astype(np.float32))], [("Y", None)], ml_opset=2,
                                    keys_floats=[0.0, 2.0, 4.0], values_floats=[0.5, 2.5, 4.5],
                                    default_float=-1.0), {"X": xi.astype(np.float32)}),
        ("label_encoder_tensor_double", model(
            "LabelEncoder", [("X", xi.astype(np.float64))], [("Y", None)], ml_opset=4,
            keys_tensor=numpy_helper.from_array(np.array([1.0, 3.0, 5.0]), "k"),
            values_tensor=numpy_helper.from_array(np.array([10, 30, 50], np.int64), "v"),
            default_tensor=numpy_helper.from_array(np.array([-5], np.int64), "d")), {"X": xi.astype(np.float64)}),
    ]


def add_base(a, base, as_tensor):
    if base is not None and as_tensor:
        a["base_values_as_tensor"] = numpy_helper.from_array(np.array(base, as_tensor), "b")
    elif base is not None:
        a["base_values"] = base


def regressor(name, x, n_trees, depth, n_out, agg, post="NONE", modes=("BRANCH_LEQ",), miss=False,
              as_tensor=None, base=None, weights="mixed"):
    t, w = random_forest(x, n_trees, depth, n_out, modes=modes, weights=weights, miss=miss,
                         eq_values=np.unique(np.round(np.nan_to_num(x), 0)))
    a = tree_attrs(t, w, "target", as_tensor=as_tensor, miss=miss)
    add_base(a, base, as_tensor)
    return (name, model("TreeEnsembleRegressor", [("X", x)], [("variable", None)], ml_opset=3 if as_tensor else 1,
                        n_targets=n_out, aggregate_function=agg, post_transform=post, **a), {"X": x})


@case
def tree_regressor():
    x = features(40, 6)
    xn = features(40, 6, nan_frac=0.15)
    xr = np.round(features(40, 6), 0).astype(np.float32)  # integral values for EQ / NEQ
    xd = features(20, 6, np.float64)
    out = []
    for agg in ("SUM", "AVERAGE", "MIN", "MAX"):
        out.append(regressor("treereg_%s_1" % agg.lower(), x, 8, 4, 1, agg, base=[0.5]))
        out.append(regressor("treereg_%s_3" % agg.lower(), x, 6, 4, 3, agg, base=[0.1, -0.2, 0.3]))
    out.append(regressor("treereg_modes", xr, 10, 5, 2, "SUM", modes=MODES))
    out.append(regressor("treereg_missing", xn, 10, 5, 1, "SUM", miss=True))
    out.append(regressor("treereg_missing_modes", xn, 10, 5, 2, "AVERAGE", modes=MODES, miss=True))
    out.append(regressor("treereg_as_tensor", x, 6, 4, 2, "SUM", as_tensor=np.float32, base=[1.0, -1.0]))
    out.append(regressor("treereg_double", xd, 6, 4, 1, "SUM"))
    # (onnxruntime has no int64 TreeEnsembleRegressor: no int64 case)
    out.append(regressor("treereg_one_row", x[:1], 6, 4, 2, "MAX"))
    out.append(regressor("treereg_double_as_tensor", xd, 6, 4, 3, "AVERAGE", as_tensor=np.float64, base=[1, 2, 3]))
    out.append(regressor("treereg_probit", x, 4, 3, 1, "AVERAGE", post="PROBIT", weights="low"))
    out.append(regressor("treereg_softmax_3", x, 6, 4, 3, "SUM", post="SOFTMAX"))
    out.append(regressor("treereg_logistic_3", x, 6, 4, 3, "SUM", post="LOGISTIC"))
    return out


def classifier(name, x, n_trees, depth, labels, post="NONE", weights="positive", base=None, modes=("BRANCH_LEQ",),
               miss=False, as_tensor=None, n_ids=None):
    n_ids = n_ids if n_ids is not None else len(labels)
    t, w = random_forest(x, n_trees, depth, n_ids, modes=modes, weights=weights, miss=miss,
                         eq_values=np.unique(np.round(np.nan_to_num(x), 0)))
    a = tree_attrs(t, w, "class", as_tensor=as_tensor, miss=miss)
    add_base(a, base, as_tensor)
    key = "classlabels_strings" if isinstance(labels[0], str) else "classlabels_int64s"
    a[key] = labels
    return (name, model("TreeEnsembleClassifier", [("X", x)], [("label", None), ("probabilities", None)],
                        ml_opset=3 if as_tensor else 1, post_transform=post, **a), {"X": x})


@case
def tree_classifier():
    x = features(40, 5)
    xn = features(40, 5, nan_frac=0.15)
    xr = np.round(features(40, 5), 0).astype(np.float32)
    xd = features(20, 5, np.float64)
    out = []
    for post in ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO"):
        out.append(classifier("treeclass_multi_" + post.lower(), x, 6, 4, [0, 1, 2], post=post,
                              weights="mixed" if post != "NONE" else "positive", base=[0.1, 0.2, -0.1]))
    out.append(classifier("treeclass_strings", x, 5, 4, ["cat", "dog", "eel", "fox"]))
    out.append(classifier("treeclass_modes_missing", xn, 8, 5, [0, 1, 2], modes=MODES, miss=True))
    out.append(classifier("treeclass_modes_eq", xr, 8, 5, [5, 6, 7], modes=MODES))
    out.append(classifier("treeclass_as_tensor", x, 5, 4, [0, 1, 2], as_tensor=np.float32, base=[0.0, 0.5, 0.0]))
    out.append(classifier("treeclass_double_as_tensor", xd, 5, 4, [0, 1, 2], post="LOGISTIC", weights="mixed",
                          as_tensor=np.float64))
    out.append(classifier("treeclass_double", xd, 5, 4, [0, 1, 2], post="SOFTMAX", weights="mixed"))
    # random forest, two classes: a weight for each class at every leaf
    out.append(classifier("treeclass_rf_binary", x, 8, 4, [0, 1], weights="positive"))
    out.append(classifier("treeclass_rf_binary_strings", x, 8, 4, ["neg", "pos"], weights="positive"))
    out.append(classifier("treeclass_binary_labels_5_9", x, 6, 4, [5, 9], weights="positive"))
    out.append(classifier("treeclass_binary_two_bases", x, 6, 4, [0, 1], weights="mixed", base=[0.1, 0.2]))
    # onnxruntime's rules for one class id and two base values: the score of
    # class 1 is base_values[1] plus class 0's (none here), class 0 unscored is 0
    out.append(classifier("treeclass_binary_two_bases_class1", x, 6, 3, [3, 4], weights="class1", base=[0.2, 0.2],
                          n_ids=1))
    out.append(classifier("treeclass_binary_two_bases_class0", x, 6, 3, [3, 4], weights="mixed", base=[0.2, 0.2],
                          n_ids=1))
    xi32 = np.round(x * 3).astype(np.int32)
    out.append(classifier("treeclass_int32", xi32, 5, 4, [0, 1, 2], post="SOFTMAX", weights="mixed"))
    # gradient boosting, two classes: one score (class id 0), one base value, LOGISTIC
    out.append(classifier("treeclass_gb_binary_logistic", x, 10, 3, [0, 1], post="LOGISTIC", weights="mixed",
                          base=[0.3], n_ids=1))
    out.append(classifier("treeclass_gb_binary_none", x, 10, 3, [0, 1], weights="mixed", base=[-0.2], n_ids=1))
    out.append(classifier("treeclass_gb_binary_strings", x, 10, 3, ["a", "b"], post="LOGISTIC", weights="mixed",
                          base=[0.1], n_ids=1))
    # one class id, positive weights (a one-class forest's probability)
    out.append(classifier("treeclass_binary_positive", x, 6, 3, [0, 1], weights="class1", n_ids=1))
    out.append(classifier("treeclass_binary_positive_nobase", x, 6, 3, [0, 1], weights="positive", n_ids=1))
    return out


def v5_from_v1(x, n_trees, depth, n_targets, modes=("BRANCH_LEQ",), miss=False, member=False):
    """A TreeEnsemble (ai.onnx.ml 5) built from a random forest."""
    t, w = random_forest(x, n_trees, depth, n_targets, modes=modes, weights="mixed", miss=miss,
                         eq_values=np.unique(np.round(np.nan_to_num(x), 0)))
    code = {m: i for i, m in enumerate(MODES)}
    ix = {(a, b): i for i, (a, b) in enumerate(zip(t["treeids"], t["nodeids"]))}
    leaf_of, leaves_t, leaves_w = {}, [], []
    for tr, nd, tid, wt in zip(w["treeids"], w["nodeids"], w["ids"], w["weights"]):
        leaf_of.setdefault((tr, nd), []).append(len(leaves_t))
        leaves_t.append(tid)
        leaves_w.append(wt)
    # a leaf with several targets becomes a chain of... keep one weight per leaf: first target only
    inner = [i for i, m in enumerate(t["modes"]) if m != "LEAF"]
    pos = {i: k for k, i in enumerate(inner)}
    nodes = dict(feat=[], split=[], mode=[], tn=[], tl=[], fn=[], fl=[], miss=[])
    members = []
    for i in inner:
        nodes["feat"].append(t["featureids"][i])
        m = code[t["modes"][i]]
        if member and m in (4, 5) and RNG.random() < 0.7:
            m = 6
            vals = sorted({float(v) for v in RNG.integers(-2, 4, 3)})
            members += vals + [float("nan")]
        nodes["split"].append(t["values"][i])
        nodes["mode"].append(m)
        nodes["miss"].append(t["miss"][i])
        for key_id, key_leaf, child in (("tn", "tl", t["true"][i]), ("fn", "fl", t["false"][i])):
            c = ix[(t["treeids"][i], child)]
            if t["modes"][c] == "LEAF":
                nodes[key_id].append(leaf_of[(t["treeids"][i], child)][0])
                nodes[key_leaf].append(1)
            else:
                nodes[key_id].append(pos[c])
                nodes[key_leaf].append(0)
    roots = [pos[ix[(tr, 0)]] for tr in sorted(set(t["treeids"]))]
    return nodes, roots, leaves_t, leaves_w, members


@case
def tree_ensemble_v5():
    x = features(30, 5)
    xr = np.round(features(30, 5, nan_frac=0.1), 0).astype(np.float32)
    xd = features(20, 5, np.float64)
    out = []
    combos = [("sum", 1, 0, x, 3, {}), ("average", 0, 0, x, 2, {}), ("min", 2, 0, x, 2, {}), ("max", 3, 0, x, 2, {}),
              ("softmax", 1, 1, x, 3, {}), ("logistic", 1, 2, x, 3, {}), ("probit", 0, 4, x * 0.05, 1, {}),
              ("member", 1, 0, xr, 2, dict(modes=MODES, miss=True, member=True)),
              ("double", 1, 0, xd, 2, {})]
    for name, agg, post, data, nt, kw in combos:
        nodes, roots, lt, lw, members = v5_from_v1(data, 6, 4, nt, **kw)
        dt = np.float64 if data.dtype == np.float64 else np.float32
        if name == "probit":
            lw = [abs(v) * 0.1 for v in lw]
        a = dict(nodes_featureids=nodes["feat"],
                 nodes_splits=numpy_helper.from_array(np.array(nodes["split"], dt), "s"),
                 nodes_modes=numpy_helper.from_array(np.array(nodes["mode"], np.uint8), "m"),
                 nodes_truenodeids=nodes["tn"], nodes_trueleafs=nodes["tl"], nodes_falsenodeids=nodes["fn"],
                 nodes_falseleafs=nodes["fl"], tree_roots=roots, leaf_targetids=lt,
                 leaf_weights=numpy_helper.from_array(np.array(lw, dt), "w"), n_targets=nt,
                 aggregate_function=agg, post_transform=post)
        if kw.get("miss"):
            a["nodes_missing_value_tracks_true"] = nodes["miss"]
        if members:
            a["membership_values"] = numpy_helper.from_array(np.array(members, dt), "mv")
        out.append(("tree_ensemble5_" + name, model("TreeEnsemble", [("X", data)], [("Y", None)], ml_opset=5, **a),
                    {"X": data}))
    return out


SKLEARN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sklearn")


def with_zipmap(case_, labels):
    """A classifier case (name, model, feeds) with its probabilities
    through ZipMap, as skl2onnx exports it: output 1 becomes
    output_probability, a seq(map(int64|string, float))."""
    name, m, feeds = case_
    strs = isinstance(labels[0], str)
    m.graph.node.append(helper.make_node("ZipMap", ["probabilities"], ["output_probability"], domain=ML,
                                         name="ZipMap", **{"classlabels_strings" if strs else
                                                           "classlabels_int64s": labels}))
    del m.graph.output[1]
    key = TensorProto.STRING if strs else TensorProto.INT64
    m.graph.output.append(helper.make_value_info("output_probability", helper.make_sequence_type_proto(
        helper.make_map_type_proto(key, helper.make_tensor_type_proto(TensorProto.FLOAT, [])))))
    return name, m, feeds


@case
def zipmap():
    """LinearClassifier and TreeEnsembleClassifier through ZipMap, string
    and int64 labels, batch 1 and N; ZipMap alone on a 1-D row."""
    out = []
    for n in (1, 9):
        x = features(n, 4)
        coef = RNG.normal(0, 0.8, (3, 4)).astype(np.float32)
        for labels in ([3, 7, 11], ["setosa", "versicolor", "virginica"]):
            key = "classlabels_strings" if isinstance(labels[0], str) else "classlabels_ints"
            kind = "strings" if isinstance(labels[0], str) else "int64"
            m = model("LinearClassifier", [("X", x)], [("label", None), ("probabilities", None)], ml_opset=1,
                      coefficients=coef.ravel().tolist(), intercepts=[0.1, -0.2, 0.3], post_transform="SOFTMAX",
                      **{key: labels})
            out.append(with_zipmap(("zipmap_linear_%s_n%d" % (kind, n), m, {"X": x}), labels))
            labels4 = labels + (["zebra"] if kind == "strings" else [13])
            out.append(with_zipmap(classifier("zipmap_tree_%s_n%d" % (kind, n), features(n, 5), 5, 4, labels4,
                                              post="SOFTMAX", weights="mixed"), labels4))
    row = np.array([0.25, 0.5, 0.125, 0.125], np.float32)
    m = helper.make_model(helper.make_graph(
        [helper.make_node("ZipMap", ["X"], ["Z"], domain=ML, classlabels_int64s=[-1, 0, 5, 1 << 40])], "zipmap",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4])],
        [helper.make_value_info("Z", helper.make_sequence_type_proto(helper.make_map_type_proto(
            TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, []))))]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)])
    m.ir_version = 8
    out.append(("zipmap_alone_1d", m, {"X": row}))
    return out


@case
def sklearn_pipelines():
    """Real pipelines exported by skl2onnx (gen_sklearn.py wrote them);
    zipmap_logreg keeps skl2onnx's default ZipMap."""
    out = []
    for f in sorted(os.listdir(SKLEARN)):
        if not f.endswith(".onnx"):
            continue
        m = onnx.load(os.path.join(SKLEARN, f))
        t = onnx.TensorProto()
        with open(os.path.join(SKLEARN, f[:-5] + ".X.pb"), "rb") as fh:
            t.ParseFromString(fh.read())
        out.append(("sklearn_" + f[:-5], m, {m.graph.input[0].name: numpy_helper.to_array(t)}))
    return out


# ------------------------------------------------------------- running

def out_entry(name, i):
    import re
    base = re.sub(r"[^A-Za-z0-9._-]", "_", name) if name else "output_%d" % i
    return base + ".pb"


def compare(got, want):
    if got.shape != want.shape:
        return "shape %s, expected %s" % (got.shape, want.shape)
    if want.dtype.kind in "OUS":
        g = [s.decode() if isinstance(s, bytes) else str(s) for s in got.ravel()]
        w = [s.decode() if isinstance(s, bytes) else str(s) for s in want.ravel()]
        bad = [i for i in range(len(w)) if g[i] != w[i]]
        return "strings differ at %d places, first %d: %r vs %r" % (len(bad), bad[0], g[bad[0]], w[bad[0]]) if bad else None
    if got.dtype != want.dtype:
        return "type %s, expected %s" % (got.dtype, want.dtype)
    if want.dtype.kind in "iub":
        bad = np.flatnonzero(got.ravel() != want.ravel())
        return "%d values differ, first at %d: %s vs %s" % (len(bad), bad[0], got.ravel()[bad[0]],
                                                            want.ravel()[bad[0]]) if len(bad) else None
    g, w = got.astype(np.float64).ravel(), want.astype(np.float64).ravel()
    nan_ok = np.isnan(g) == np.isnan(w)
    err = np.abs(g - w)
    ok = nan_ok & (np.isnan(w) | (err <= RTOL * np.abs(w) + ATOL))
    if ok.all():
        return None
    i = int(np.flatnonzero(~ok)[0])
    return "%d of %d values off, first at %d: %r vs %r" % (int((~ok).sum()), len(ok), i, g[i], w[i])


def compare_maps(folder, want):
    """folder/J/keys.npy and values.npy against onnxruntime's list of dicts."""
    items = sorted((e for e in os.listdir(folder) if e.isdigit()), key=int)
    if len(items) != len(want):
        return "%d maps, expected %d" % (len(items), len(want))
    for j, w in enumerate(want):
        keys = np.load(os.path.join(folder, str(j), "keys.npy"))
        vals = np.load(os.path.join(folder, str(j), "values.npy"))
        wk = list(w.keys())
        gk = [str(k) for k in keys] if keys.dtype.kind == "U" else [int(k) for k in keys]
        if gk != wk:
            return "map %d: keys %r, expected %r" % (j, gk, wk)
        if vals.dtype != np.float32:
            return "map %d: values of type %s, expected float32" % (j, vals.dtype)
        msg = compare(vals, np.array(list(w.values()), np.float32))
        if msg:
            return "map %d: %s" % (j, msg)
    return None


def ort_model(m):
    """The model onnxruntime computes the same function with. Its
    TreeEnsemble (ai.onnx.ml 5) reads post_transform 1 as LOGISTIC and 2
    as SOFTMAX, where the operator's definition (and onnx's reference)
    says 1 is SOFTMAX and 2 LOGISTIC: onnxruntime gets the other number."""
    n = m.graph.node[0]
    if n.op_type != "TreeEnsemble":
        return m
    r = onnx.ModelProto()
    r.CopyFrom(m)
    for a in r.graph.node[0].attribute:
        if a.name == "post_transform" and a.i in (1, 2):
            a.i = 3 - a.i
    return r


def run_case(tandem, out_dir, name, m, feeds):
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    onnx.save(m, path)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(ort_model(m).SerializeToString(), so, providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    maps = any(isinstance(w, list) for w in want)  # a sequence of maps: the npy form
    cmd = [tandem, "run", path, "--output-dir", os.path.join(d, "got"), "--overwrite", "--threads", "1"]
    if not maps:
        cmd += ["--output-format", "pb"]
    for k, v in feeds.items():
        f = os.path.join(d, "input_%s.pb" % k)
        t = numpy_helper.from_array(np.asarray(v) if v.dtype != object else v.astype(object), k)
        with open(f, "wb") as fh:
            fh.write(t.SerializeToString())
        cmd += ["--input", "%s=%s" % (k, f)]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if r.returncode != 0:
        return "tandem run exited %d: %s" % (r.returncode, r.stderr.decode(errors="replace").strip())
    for i, o in enumerate(sess.get_outputs()):
        ext = "" if isinstance(want[i], list) else ".npy" if maps else ".pb"
        p = os.path.join(d, "got", out_entry(o.name, i)[:-3] + ext)
        if not os.path.exists(p):
            return "output %s was not written" % o.name
        if isinstance(want[i], list):
            msg = compare_maps(p, want[i])
            if msg:
                return "output %s: %s" % (o.name, msg)
            continue
        if maps:
            got = np.load(p)
        else:
            t = onnx.TensorProto()
            with open(p, "rb") as fh:
                t.ParseFromString(fh.read())
            got = numpy_helper.to_array(t)
        msg = compare(got, np.asarray(want[i]))
        if msg:
            return "output %s: %s" % (o.name, msg)
    return None


def cli_checks(tandem, out_dir):
    """info and plan on a classifier and through ZipMap; DictVectorizer
    (a map input) refused at load; pb refuses a sequence of maps."""
    fails = []
    x = features(4, 3)
    m = model("LinearClassifier", [("X", x)], [("label", None), ("probabilities", None)], ml_opset=1,
              coefficients=[0.1] * 9, intercepts=[0.0] * 3, classlabels_ints=[0, 1, 2])
    p = os.path.join(out_dir, "cli_classifier.onnx")
    onnx.save(m, p)
    for cmd in (["info", p], ["plan", p]):
        r = subprocess.run([tandem] + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        text = r.stdout.decode(errors="replace")
        if r.returncode != 0 or ("LinearClassifier" not in text and "1 node" not in text):
            fails.append("tandem %s exited %d: %s" % (cmd[0], r.returncode, r.stderr.decode(errors="replace")))
        elif cmd[0] == "info" and ("int64" not in text or "float" not in text):
            fails.append("tandem info does not give the outputs' types (int64 label, float probabilities):\n" + text)
    zm = helper.make_node("ZipMap", ["probabilities"], ["output_probability"], domain=ML, name="zipmap_1",
                          classlabels_int64s=[0, 1, 2])
    m.graph.node.append(zm)
    del m.graph.output[1]
    m.graph.output.append(helper.make_value_info("output_probability", helper.make_sequence_type_proto(
        helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, [])))))
    p = os.path.join(out_dir, "cli_zipmap.onnx")
    onnx.save(m, p)
    r = subprocess.run([tandem, "info", p], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    text = r.stdout.decode(errors="replace")
    if r.returncode != 0 or "output_probability  sequence<map<int64,float>>" not in text:
        fails.append("ZipMap: tandem info exited %d without 'sequence<map<int64,float>>': %s%s"
                     % (r.returncode, text, r.stderr.decode(errors="replace")))
    fi = os.path.join(out_dir, "cli_zipmap_X.npy")
    np.save(fi, x)
    r = subprocess.run([tandem, "run", p, "--input", "X=" + fi, "--output-dir", os.path.join(out_dir, "cli_zipmap_pb"),
                        "--output-format", "pb"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    err = r.stderr.decode(errors="replace").strip()
    if r.returncode != 2 or "sequence of maps" not in err or len(err.splitlines()) != 1:
        fails.append("ZipMap with --output-format pb: expected exit 2 and one sentence, got %d: %s"
                     % (r.returncode, err))
    r = subprocess.run([tandem, "run", p, "--input", "X=" + fi], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    text = r.stdout.decode(errors="replace")
    if r.returncode != 0 or "sequence<map<int64,float>>  4 maps" not in text or "[3] map  3 entries  {0: " not in text:
        fails.append("ZipMap: tandem run's summary lacks the 4 maps: %d %s" % (r.returncode, text))
    dv = helper.make_model(helper.make_graph(
        [helper.make_node("DictVectorizer", ["D"], ["Y"], domain=ML, name="dv_1", int64_vocabulary=[1, 2])], "dv",
        [helper.make_value_info("D", helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(
            TensorProto.FLOAT, [])))], [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 2])]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)])
    p = os.path.join(out_dir, "cli_dictvectorizer.onnx")
    onnx.save(dv, p)
    r = subprocess.run([tandem, "info", p], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    err = r.stderr.decode(errors="replace").strip()
    if r.returncode != 2 or "dv_1" not in err or "map" not in err or len(err.splitlines()) != 1:
        fails.append("DictVectorizer: expected exit 2 and one sentence naming node dv_1, got %d: %s"
                     % (r.returncode, err))
    # TreeEnsembleRegressor at ai.onnx.ml 5, where onnx deprecates it
    t, w = random_forest(x, 2, 2, 1)
    m5 = model("TreeEnsembleRegressor", [("X", x)], [("Y", None)], ml_opset=5, **tree_attrs(t, w, "target"))
    p = os.path.join(out_dir, "cli_tree_ml5.onnx")
    onnx.save(m5, p)
    r = subprocess.run([tandem, "info", p], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    err = r.stderr.decode(errors="replace").strip()
    if r.returncode != 2 or "deprecated" not in err or "TreeEnsemble replaces" not in err:
        fails.append("TreeEnsembleRegressor at ai.onnx.ml 5: expected exit 2 saying it is deprecated, got %d: %s"
                     % (r.returncode, err))
    # malformed ensembles and models: one sentence and exit 2, no hang or crash
    x2 = features(3, 2)
    loop = model("TreeEnsemble", [("X", x2)], [("Y", None)], ml_opset=5, nodes_featureids=[0, 1],
                 nodes_splits=numpy_helper.from_array(np.array([0.0, 1.0], np.float32), "s"),
                 nodes_modes=numpy_helper.from_array(np.array([0, 0], np.uint8), "m"),
                 nodes_truenodeids=[1, 0], nodes_trueleafs=[0, 0], nodes_falsenodeids=[1, 0], nodes_falseleafs=[0, 0],
                 tree_roots=[0], leaf_targetids=[0], leaf_weights=numpy_helper.from_array(np.array([1.0], np.float32),
                                                                                         "w"), n_targets=1)
    t, w = random_forest(x2, 1, 2, 1)
    far = dict(tree_attrs(t, w, "target"))
    far["nodes_featureids"] = [7 if m != "LEAF" else 0 for m in t["modes"]]
    bad = [("loop", loop, "loops"),
           ("feature", model("TreeEnsembleRegressor", [("X", x2)], [("Y", None)], **far), "feature 7"),
           ("coefficients", model("LinearClassifier", [("X", x2)], [("label", None), ("probabilities", None)],
                                  ml_opset=1, coefficients=[1.0, 2.0, 3.0], classlabels_ints=[0, 1, 2]), "coefficients")]
    for name, bm, want in bad:
        p = os.path.join(out_dir, "cli_bad_%s.onnx" % name)
        onnx.save(bm, p)
        fi = os.path.join(out_dir, "cli_bad_X.pb")
        with open(fi, "wb") as fh:
            fh.write(numpy_helper.from_array(x2, "X").SerializeToString())
        r = subprocess.run([tandem, "run", p, "--input", "X=" + fi], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=60)
        err = r.stderr.decode(errors="replace").strip()
        if r.returncode != 2 or want not in err or len(err.splitlines()) != 1:
            fails.append("malformed %s: expected exit 2 and one sentence with '%s', got %d: %s"
                         % (name, want, r.returncode, err))
    # an ai.onnx.ml opset newer than 5
    m6 = model("Scaler", [("X", x)], [("Y", None)], ml_opset=5, offset=[0.0], scale=[1.0])
    m6.opset_import[1].version = 6
    p = os.path.join(out_dir, "cli_ml6.onnx")
    onnx.save(m6, p)
    r = subprocess.run([tandem, "info", p], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    err = r.stderr.decode(errors="replace").strip()
    if r.returncode != 2 or "opset 6 of domain ai.onnx.ml is newer" not in err:
        fails.append("ai.onnx.ml 6: expected exit 2 saying it is newer than tandem supports, got %d: %s"
                     % (r.returncode, err))
    # skl2onnx's own export (its default: probabilities through ZipMap);
    # its outputs are compared in the case sklearn_zipmap_logreg
    p = os.path.join(SKLEARN, "zipmap_logreg.onnx")
    for cmd in ("info", "plan"):
        r = subprocess.run([tandem, cmd, p], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        if r.returncode != 0:
            fails.append("tandem %s on skl2onnx's ZipMap exited %d: %s"
                         % (cmd, r.returncode, r.stderr.decode(errors="replace").strip()))
    return fails


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tandem", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("-k", action="append", default=[], help="only cases whose name contains this")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    passed, failed = 0, []
    for gen in CASES:
        for name, m, feeds in gen():
            if a.k and not any(k in name for k in a.k):
                continue
            try:
                msg = run_case(a.tandem, a.out, name, m, feeds)
            except Exception as e:  # noqa: BLE001 - a case's own failure
                msg = "%s: %s" % (type(e).__name__, e)
            if msg:
                failed.append(name)
                print("FAIL %s: %s" % (name, msg))
            else:
                passed += 1
    if not a.k:
        for msg in cli_checks(a.tandem, a.out):
            failed.append("cli")
            print("FAIL cli: " + msg)
    print("%d passed, %d failed" % (passed, len(failed)))
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
