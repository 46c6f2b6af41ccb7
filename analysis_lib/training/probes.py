"""Linear probes: a fresh classifier on one layer's vectors.

:func:`logistic_probe` is the book's one probe (every chapter that fits a classifier to a
layer fits this one); :func:`linear_probe` fits it on one layer's sentence vectors of a task.
The base model's layer gives Phang et al.'s TUNEDORIG configuration (the pretrained encoder
truncated, a head trained on that layer), a fine-tuned encoder's layer gives TUNED with a
probe head (the cheaper stand-in for retraining the model's own head).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..data.tasks import Split, Task, split_corpus
from ..layers import check_layer
from ..models import LoadedModel, load

if TYPE_CHECKING:
    import sklearn.linear_model
    import sklearn.pipeline


def logistic_probe(C: float = 1.0, *, standardise: bool = True
                   ) -> sklearn.pipeline.Pipeline | sklearn.linear_model.LogisticRegression:
    """The book's linear probe, unfitted: a multinomial logistic regression (scikit-learn's)
    with L2 strength ``1 / C``, behind scikit-learn's ``StandardScaler`` fitted on the
    training rows (``standardise=False`` leaves the scaling to the caller).

    It is fitted by Newton-CG to scikit-learn's default tolerance (1e-4). On MiniLM's word
    rows with 43 silver dependency labels, L-BFGS stops after about 130 iterations with
    coefficients 1-3e-2 from the exact optimum (L-BFGS run to a tolerance of 1e-10), Newton-CG
    after about 15 with 3-8e-3, in a fifth to a third of the time; the optimum is unique
    (the loss is strictly convex), so the solver changes only how close a fit gets to it.
    The fit draws no random numbers: the same rows give the same probe."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    probe = LogisticRegression(C=C, solver="newton-cg", max_iter=1000)
    return make_pipeline(StandardScaler(), probe) if standardise else probe


def linear_probe(model: str | LoadedModel, task: Task, layer: int, *, pooling: str = "first",
                 max_train: int | None = None, C: float = 1.0,
                 **extract_options: Any) -> dict[str, float]:
    """Fit a fresh :func:`logistic_probe` on one layer's sentence vectors and score it on
    test.

    ``model`` is any model: the pretrained one gives Phang et al.'s TUNEDORIG configuration
    with a probe head, a fine-tuned encoder (``FineTuned.load()``) their TUNED configuration
    with a probe head. ``layer`` follows the library's convention (``0`` = embeddings,
    ``1..L``). ``pooling`` is ``"first"`` (first token, [CLS] for BERT-like models),
    ``"last"`` (last real token, for decoders) or ``"mean"`` (over the real tokens). Features
    are standardised.
    """
    from sklearn.metrics import f1_score

    from ..extract import SENTENCES_ONLY, extract

    if task.regression:
        raise ValueError("linear_probe fits a classifier; the task is a regression")
    if pooling not in ("first", "last", "mean"):
        raise ValueError(f"pooling must be 'first', 'last' or 'mean', got {pooling!r}")
    loaded = model if isinstance(model, LoadedModel) else load(model)
    layer = check_layer(layer, loaded.info.n_attention_layers, "layer")
    train = task.train if max_train is None else task.train.subset(range(min(max_train,
                                                                             len(task.train))))

    def features(split: Split) -> np.ndarray:
        options = {"word_rows": SENTENCES_ONLY, "sentences": [pooling], **extract_options}
        result = extract(loaded, split_corpus(split), progress=False, **options)
        return result.layer(layer, pooling)

    clf = logistic_probe(C)
    clf.fit(features(train), train.labels)
    pred = clf.predict(features(task.test))
    return {"accuracy": float(np.mean(pred == task.test.labels)),
            "macro_f1": float(f1_score(task.test.labels, pred, average="macro",
                                       zero_division=0)),
            "majority_baseline": task.majority_baseline("test"), "layer": layer}
