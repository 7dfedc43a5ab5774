"""The floors an image classifier must beat: scikit-learn on raw pixels, nothing tuned.

- SVC with an RBF kernel at scikit-learn's settings (C=1, gamma="scale"): on the 8x8 digits,
  the classic kernel baseline.
- Multinomial logistic regression on the pixels (L2, C=1, lbfgs): a linear classifier.

Both read the flattened pixels in [0, 1], fitted on (up to `max_train` images of) the training
split and scored on the same split as the model, by `classify_metrics`. scikit-learn comes with
the `vision` and `test` extras.
"""

from __future__ import annotations

import importlib.util
import time

import numpy as np

from transformer_jax.data.images.examples import ImageSplit
from transformer_jax.tasks import classify_metrics

# scikit-learn (with threadpoolctl) is imported when a baseline is fit (a slow import at every
# train.py start otherwise); only this module needs it, and the error is raised when it is used.
HAVE_SKLEARN = importlib.util.find_spec("sklearn") is not None

NAMES = {"svc_rbf": "SVC (RBF kernel)", "logistic_regression": "logistic regression"}


def _classifier(name: str):
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import SVC

    if name == "svc_rbf":
        return SVC(kernel="rbf", C=1.0, gamma="scale")
    return LogisticRegression(C=1.0, max_iter=2000)


def pixel_baselines(
    train: ImageSplit, test: ImageSplit, num_classes: int, *, max_train: int = 10_000
) -> dict[str, dict[str, float]]:
    """Each baseline's accuracy, macro-F1 and fit+predict seconds on `test`.

    Args:
      train: the training images [N, H, W, C] and labels; the first `max_train` are used
        (an RBF SVC's fit grows with N^2).
      test: the images to score.
      num_classes: K.
    """
    if not HAVE_SKLEARN:
        raise ImportError(
            "pixel_baselines needs scikit-learn: pip install 'transformer_jax[vision]'."
        )
    from threadpoolctl import threadpool_limits  # Comes with scikit-learn.

    x_train = train.images[:max_train].reshape(min(len(train), max_train), -1)
    y_train = train.labels[:max_train]
    x_test = test.images.reshape(len(test), -1)
    out = {}
    for name in NAMES:
        started = time.time()
        # One BLAS thread: these fits are small, and OpenBLAS threads spin against whatever else
        # runs, which on a busy machine makes a small fit many times slower.
        with threadpool_limits(limits=1, user_api="blas"):
            predicted = _classifier(name).fit(x_train, y_train).predict(x_test).astype(np.int64)
        out[name] = {
            "accuracy": classify_metrics.accuracy(test.labels, predicted),
            "macro_f1": classify_metrics.macro_f1(test.labels, predicted, num_classes),
            "seconds": time.time() - started,
        }
    return out
