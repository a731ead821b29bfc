#!/usr/bin/env python3
"""Writes tests/ops/ml/sklearn/: real scikit-learn pipelines exported by
skl2onnx, each as NAME.onnx with its input NAME.X.pb (rows of the data set
it was trained on, NaN where the pipeline imputes). ops.ml.ort
(ml_suite.py) runs them against onnxruntime at test time, so the test
needs neither scikit-learn nor skl2onnx; this script is run by hand when
the set changes, in a throwaway venv:

    python3 -m venv /tmp/skl && /tmp/skl/bin/pip install scikit-learn==1.9.1 \\
        skl2onnx==1.20.0 onnx==1.23.2
    /tmp/skl/bin/python tests/ops/ml/gen_sklearn.py tests/ops/ml/sklearn

skl2onnx 1.20 imports the default domain twice (at one version), as
real exports of this version do. Classifiers are exported with zipmap=False,
except zipmap_logreg, which keeps skl2onnx's default ZipMap (ml_suite.py
compares its list of dicts with onnxruntime's).
"""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper
from skl2onnx import to_onnx
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris
from sklearn.ensemble import (GradientBoostingClassifier, GradientBoostingRegressor,
                              RandomForestClassifier, RandomForestRegressor)
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import Binarizer, MaxAbsScaler, Normalizer, StandardScaler
from sklearn.tree import DecisionTreeClassifier

OPSETS = {"": 17, "ai.onnx.ml": 3}


def save(out, name, est, x, dtype=np.float32, zipmap=False, opsets=None):
    x = x.astype(dtype)
    final = est.steps[-1][1] if hasattr(est, "steps") else est
    try:
        options = {id(final): {"zipmap": False}} if not zipmap else None
        m = to_onnx(est, x[:1], target_opset=opsets or OPSETS, options=options)
    except NameError:  # a model without the option (LinearSVC: no probabilities, no ZipMap)
        m = to_onnx(est, x[:1], target_opset=opsets or OPSETS)
    m.producer_name = "skl2onnx (tandem tests/ops/ml/gen_sklearn.py)"
    onnx.save(m, os.path.join(out, name + ".onnx"))
    t = numpy_helper.from_array(x, m.graph.input[0].name)
    with open(os.path.join(out, name + ".X.pb"), "wb") as f:
        f.write(t.SerializeToString())
    print("%-28s %6d bytes  %s" % (name, os.path.getsize(os.path.join(out, name + ".onnx")),
                                   sorted({n.op_type for n in m.graph.node})))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(7)
    iris = load_iris()
    xi, yi = iris.data, iris.target
    bc = load_breast_cancer()
    xb, yb = bc.data, bc.target
    db = load_diabetes()
    xd, yd = db.data, db.target
    pick_i = rng.choice(len(xi), 40, replace=False)
    pick_b = rng.choice(len(xb), 40, replace=False)
    pick_d = rng.choice(len(xd), 40, replace=False)

    save(out, "scaler_logreg_iris", make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)).fit(xi, yi),
         xi[pick_i])
    save(out, "scaler_logreg_cancer",
         make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(xb, yb), xb[pick_b])
    save(out, "normalizer_logreg_iris", make_pipeline(Normalizer(), LogisticRegression(max_iter=500)).fit(xi, yi),
         xi[pick_i])
    save(out, "maxabs_binarizer_logreg", make_pipeline(
        MaxAbsScaler(), Binarizer(threshold=0.5), LogisticRegression(max_iter=500)).fit(xi, yi), xi[pick_i])
    save(out, "random_forest_iris", RandomForestClassifier(n_estimators=12, max_depth=6, random_state=0).fit(xi, yi),
         xi[pick_i])
    save(out, "random_forest_cancer",
         RandomForestClassifier(n_estimators=10, max_depth=5, random_state=0).fit(xb, yb), xb[pick_b])
    save(out, "gradient_boosting_cancer",
         GradientBoostingClassifier(n_estimators=25, max_depth=3, random_state=0).fit(xb, yb), xb[pick_b])
    save(out, "gradient_boosting_iris",
         GradientBoostingClassifier(n_estimators=15, max_depth=3, random_state=0).fit(xi, yi), xi[pick_i])
    save(out, "random_forest_regressor", RandomForestRegressor(n_estimators=10, max_depth=6, random_state=0).fit(
        xd, yd), xd[pick_d])
    # (no double model: skl2onnx 1.20 declares a double TreeEnsembleRegressor
    # output at ai.onnx.ml 1, which onnxruntime refuses)
    save(out, "gradient_boosting_regressor",
         GradientBoostingRegressor(n_estimators=30, max_depth=3, random_state=0).fit(xd, yd), xd[pick_d])
    save(out, "scaler_linreg_diabetes", make_pipeline(StandardScaler(), LinearRegression()).fit(xd, yd), xd[pick_d])
    # missing values, imputed
    xn = xi.copy()
    xn[rng.random(xn.shape) < 0.1] = np.nan
    save(out, "imputer_tree_iris", make_pipeline(SimpleImputer(strategy="mean"), StandardScaler(),
                                                  DecisionTreeClassifier(max_depth=5, random_state=0)).fit(xn, yi),
         xn[pick_i])
    # (HistGradientBoostingClassifier, whose trees track NaN, does not
    # export with skl2onnx 1.20: booleans in nodes_missing_value_tracks_true)
    save(out, "zipmap_logreg", LogisticRegression(max_iter=500).fit(xi, yi), xi[pick_i], zipmap=True)


if __name__ == "__main__":
    main()
