"""A scikit-learn classifier, trained here on synthetic data (no download), and the callable that serves it.

``make_classification`` makes 600 rows of 20 features in two classes; a random forest is fitted
on the first 500 at import, so every process that imports this module (the server, the client
checking its answers, ``pytriton_like serve``) holds the same model. A real service would
``joblib.load`` a fitted model instead.
"""

import numpy as np
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier

from pytriton_like.decorators import batch

FEATURES = 20
TRAINING_ROWS = 500


def dataset():
    """The synthetic rows and labels: the first TRAINING_ROWS train the model, the rest are held out."""
    features, labels = make_classification(n_samples=600, n_features=FEATURES, n_informative=6, random_state=0)
    return features.astype(np.float32), labels


def fit() -> RandomForestClassifier:
    features, labels = dataset()
    return RandomForestClassifier(n_estimators=50, random_state=0).fit(features[:TRAINING_ROWS], labels[:TRAINING_ROWS])


class Classifier:
    """The fitted forest as an inference callable: a batch of feature rows in, labels and probabilities out."""

    def __init__(self):
        self.forest = fit()

    @batch
    def __call__(self, features):
        probabilities = self.forest.predict_proba(features).astype(np.float32)
        labels = self.forest.classes_[probabilities.argmax(axis=1)].astype(np.int64)
        return {"label": labels[:, None], "probabilities": probabilities}


classifier = Classifier()  # what `pytriton_like serve model:classifier` serves
