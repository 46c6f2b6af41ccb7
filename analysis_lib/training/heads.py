"""A task model's own head, as a function of one layer's first-token vector.

The sequence-classification heads of BERT, ALBERT, RoBERTa, ELECTRA and DistilBERT read only
the first token's final vector: BERT and ALBERT through their pooler (dense + tanh) then a
classifier, RoBERTa and ELECTRA through a dense + activation + projection, DistilBERT through
a pre-classifier + ReLU. :class:`FirstTokenHead` applies that same head to the first-token
vector of *any* layer, which is how Phang et al. read a truncated model (UNTUNED: the tuned
head, unchanged), and :func:`fit_head` re-trains it on a layer (TUNED, TUNEDORIG) from cached
vectors, without running the encoder again; :func:`fit_heads` trains several such heads side
by side (one per layer and configuration) in one pass over the batches. Heads that read
another token (GPT-2's last token, XLNet's summary) are refused with a pointer to the
logistic-regression probe. :func:`injection` reads one model's vectors, mapped into another
model's space, with the other model's head (Ren et al. 2023, Table 5).
"""

from __future__ import annotations

import copy
import functools
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from .. import alignment
from ..alignment import pairs as alignment_pairs
from ..runtime.device import fused_optimizer
from ..runtime.profile import profiled
from ..runtime.threads import one_thread, torch_threads

FIRST_TOKEN_FAMILIES = ("bert", "albert", "roberta", "electra", "distilbert")
#: torch threads of :func:`fit_heads`: its batched products are large enough for a second
#: thread to pay (a dozen MiniLM heads: 4.7 s against 7.8 s on one), and the count is fixed
#: so that the weights do not depend on the machine's cores
HEADS_THREADS = 2


class FirstTokenHead(torch.nn.Module):
    """The head of ``task_model`` (a ``*ForSequenceClassification``) on first-token vectors
    (B, hidden) -> logits (B, num_labels). The modules are the task model's own (copied when
    ``copy_weights``), so applying it to the last layer reproduces the model's logits."""

    def __init__(self, task_model: torch.nn.Module, copy_weights: bool = True):
        super().__init__()
        config: Any = task_model.config  # a transformers configuration
        family = config.model_type
        if family not in FIRST_TOKEN_FAMILIES:
            raise ValueError(
                f"the {family} task head does not read the first token; re-fit a probe on "
                "the layer instead (training.probes.linear_probe, head='probe')")
        take = copy.deepcopy if copy_weights else (lambda m: m)
        self.family = family
        base: Any = task_model.base_model
        if family == "bert":
            self.pool = take(base.pooler)
        elif family == "albert":
            self.pool = torch.nn.Sequential(take(base.pooler), take(base.pooler_activation))
        elif family == "distilbert":
            self.pool = torch.nn.Sequential(take(task_model.pre_classifier), torch.nn.ReLU())
        else:
            self.pool = None
        self.dropout = take(task_model.dropout) if hasattr(task_model, "dropout") else \
            torch.nn.Identity()
        self.classifier = take(task_model.classifier)

    def forward(self, first: torch.Tensor) -> torch.Tensor:
        if self.family in ("roberta", "electra"):
            return self.classifier(first[:, None, :])  # the head reads features[:, 0]
        if self.family == "bert":
            pooled = self.pool(first[:, None, :])
        else:
            pooled = self.pool(first)
        return self.classifier(self.dropout(pooled))


def head_logits(head: torch.nn.Module, features: np.ndarray, batch_size: int = 256
                ) -> np.ndarray:
    """Logits of ``head`` (in eval mode) on first-token vectors (n, hidden)."""
    head.eval()
    out = []
    with torch.inference_mode(), one_thread():
        for start in range(0, len(features), batch_size):
            x = torch.as_tensor(np.asarray(features[start:start + batch_size]),
                                dtype=torch.float32)
            out.append(head(x).float().numpy())
    return np.concatenate(out)


def check_head_data(train: np.ndarray, labels: np.ndarray, validation: np.ndarray,
                    val_labels: np.ndarray, what: str = "") -> None:
    """Refuse what a head cannot learn from: features that are not 2-D, hold NaN or
    infinite values (a NaN makes every logit NaN, and the "accuracy" is then the share of
    one class), or do not match their labels in number; labels that are not whole numbers
    >= 0. ``what`` names the arrays in the message (e.g. the layer)."""
    where = f" ({what})" if what else ""
    for name, features, targets in (("training", train, labels),
                                    ("validation", validation, val_labels)):
        x = np.asarray(features)
        y = np.asarray(targets)
        if x.ndim != 2:
            raise ValueError(f"the {name} features{where} must be 2-D (examples x features), "
                             f"got shape {x.shape}")
        if not np.issubdtype(x.dtype, np.number):
            raise TypeError(f"the {name} features{where} must be numbers, got {x.dtype}")
        bad = ~np.isfinite(x)
        if bad.any():
            rows = np.flatnonzero(bad.any(axis=1))
            raise ValueError(f"the {name} features{where} hold {int(bad.sum())} NaN or "
                             f"infinite values in {rows.size} rows (first: row {rows[0]}); "
                             "a head trained on them reports the share of one class as its "
                             "accuracy. Find where they came from (an overflow in float16, "
                             "a layer that diverged) or drop those examples")
        if len(x) != len(y):
            raise ValueError(f"{len(x)} {name} vectors for {len(y)} labels{where}")
        if y.size and not (np.issubdtype(y.dtype, np.integer) and y.min() >= 0):
            raise ValueError(f"the {name} labels{where} must be class indices (whole numbers "
                             f">= 0), got {y.dtype} values such as {y.ravel()[:3].tolist()}")


def fit_head(head: torch.nn.Module, train: np.ndarray, labels: np.ndarray,
             validation: np.ndarray, val_labels: np.ndarray, *, epochs: int = 30,
             batch_size: int = 32, learning_rate: float = 1e-3, weight_decay: float = 0.01,
             seed: int = 0) -> dict[str, float]:
    """Train ``head`` in place on fixed first-token vectors (cross-entropy, AdamW), keeping
    the weights of the epoch with the best validation accuracy. Deterministic for a seed.
    Returns ``{"epoch": best epoch, "validation_accuracy": ...}``; the data are checked
    first (:func:`check_head_data`)."""
    check_head_data(train, labels, validation, val_labels)
    labels_t = torch.as_tensor(np.asarray(labels), dtype=torch.long)
    x = torch.as_tensor(np.asarray(train), dtype=torch.float32)
    rng = np.random.default_rng(seed)
    best = (-1.0, 0, copy.deepcopy(head.state_dict()))
    with torch.random.fork_rng(devices=[]), one_thread():
        torch.manual_seed(seed)
        optimizer = torch.optim.AdamW(head.parameters(), lr=learning_rate,
                                      weight_decay=weight_decay, fused=fused_optimizer("cpu"))
        for epoch in range(1, epochs + 1):
            head.train()
            order = torch.as_tensor(rng.permutation(len(x)))
            for start in range(0, len(x), batch_size):
                rows = order[start:start + batch_size]
                loss = torch.nn.functional.cross_entropy(head(x[rows]), labels_t[rows])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
            accuracy = float(np.mean(head_logits(head, validation).argmax(1) == val_labels))
            if accuracy > best[0]:
                best = (accuracy, epoch, copy.deepcopy(head.state_dict()))
    head.load_state_dict(best[2])
    head.eval()
    return {"epoch": best[1], "validation_accuracy": best[0]}


def fit_heads(heads: Sequence[torch.nn.Module], train: Sequence[np.ndarray], labels: np.ndarray,
              validation: Sequence[np.ndarray], val_labels: np.ndarray, *, epochs: int = 30,
              batch_size: int = 32, learning_rate: float = 1e-3, weight_decay: float = 0.01,
              seed: int = 0) -> list[dict[str, float]]:
    """:func:`fit_head` for several heads of the same architecture at once: head ``k`` is
    trained on ``train[k]`` (all on the same ``labels``, in the same batch order) and keeps
    the weights of its own best validation epoch on ``validation[k]``.

    The heads' parameters are stacked and every step runs all heads in one batched call
    (``torch.func.vmap``), so a dozen small heads cost about what one does. The update of
    each head is exactly :func:`fit_head`'s (the loss is the sum of the heads' losses, and
    AdamW acts on each parameter alone); only dropout draws its masks from one stream for
    all heads, so with dropout the weights differ from :func:`fit_head`'s by chance, not in
    kind (tests compare the two without dropout).
    """
    from torch.func import functional_call, stack_module_state, vmap

    if not heads:
        return []
    if not len(heads) == len(train) == len(validation):
        raise ValueError(f"{len(heads)} heads need as many training and validation arrays, "
                         f"got {len(train)} and {len(validation)}")
    for k, (features, held_out) in enumerate(zip(train, validation)):
        check_head_data(features, labels, held_out, val_labels, f"head {k}")
    labels_t = torch.as_tensor(np.asarray(labels), dtype=torch.long)
    x = torch.stack([torch.as_tensor(np.asarray(a), dtype=torch.float32) for a in train])
    if x.shape[1] != len(labels_t):
        raise ValueError(f"{x.shape[1]} training vectors for {len(labels_t)} labels")
    x_val = torch.stack([torch.as_tensor(np.asarray(a), dtype=torch.float32)
                         for a in validation])
    params, buffers = stack_module_state(list(heads))
    template = copy.deepcopy(heads[0]).to("meta")

    def one(p, b, features):
        return functional_call(template, (p, b), (features,))

    train_step = vmap(one, randomness="different")  # a dropout mask of its own per head

    rng = np.random.default_rng(seed)
    k = len(heads)
    best_accuracy = torch.full((k,), -1.0, dtype=torch.float64)
    best_epoch = torch.zeros(k, dtype=torch.long)
    best = {name: value.detach().clone() for name, value in params.items()}
    with torch.random.fork_rng(devices=[]), torch_threads(HEADS_THREADS):
        torch.manual_seed(seed)
        optimizer = torch.optim.AdamW(list(params.values()), lr=learning_rate,
                                      weight_decay=weight_decay, fused=fused_optimizer("cpu"))
        for epoch in range(1, epochs + 1):
            template.train()
            order = torch.as_tensor(rng.permutation(x.shape[1]))
            for start in range(0, x.shape[1], batch_size):
                rows = order[start:start + batch_size]
                logits = train_step(params, buffers, x[:, rows])  # (k, batch, labels)
                loss = torch.nn.functional.cross_entropy(
                    logits.flatten(0, 1), labels_t[rows].repeat(k), reduction="sum"
                ) / len(rows)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
            template.eval()
            with torch.inference_mode():
                predicted = vmap(one)(params, buffers, x_val).argmax(-1)
            accuracy = (predicted == torch.as_tensor(np.asarray(val_labels))).double().mean(1)
            better = accuracy > best_accuracy
            best_accuracy = torch.where(better, accuracy, best_accuracy)
            best_epoch = torch.where(better, epoch, best_epoch)
            for name, value in params.items():
                best[name][better] = value.detach()[better]
    for i, head in enumerate(heads):
        head.load_state_dict({**{n: v[i] for n, v in best.items()},
                              **{n: v[i] for n, v in buffers.items()}})
        head.eval()
    return [{"epoch": int(e), "validation_accuracy": float(a)}
            for e, a in zip(best_epoch, best_accuracy)]


#: rows of :func:`injection` that are baselines, not fitted maps
INJECTION_BASELINES = ("own", "random", "random label", "identity")


@profiled("alignment", lambda *a, **k: "injection")
def injection(features: Mapping[str, Mapping[str, np.ndarray]],
              heads: Mapping[str, torch.nn.Module],
              labels: Mapping[str, np.ndarray], methods: Sequence[str], *,
              seed: int = 0) -> pd.DataFrame:
    """Table 5: for every ordered pair of models (1, 2), map model 1's last-layer first-token
    vectors into model 2's space (fitted on the training split) and classify the test split
    with model 2's head. Rows: the pair, the method (``own``: model 2 on its own vectors;
    ``random``: a random orthogonal map, Ren et al.'s "random embedding"; ``random label``:
    uniform guesses, their "random label"; ``identity`` among ``methods``: model 1's vectors
    as they are), test accuracy, and a ``note`` (why a method that cannot be fitted on the
    training split's rows has no accuracy)."""
    rows: list[dict[str, Any]] = []
    rng = np.random.default_rng(seed)
    maps: list[tuple[int, tuple[np.ndarray, np.ndarray, np.ndarray, str]]] = []
    for a, b in itertools.permutations(list(features), 2):
        head = heads[b]
        own = head_logits(head, features[b]["test"])
        rows.append({"from": a, "to": b, "method": "own", "note": "",
                     "accuracy": float(np.mean(own.argmax(1) == labels["test"]))})
        d = features[a]["test"].shape[1]
        Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
        mapped = (features[a]["test"] - features[a]["train"].mean(0)) @ Q + \
            features[b]["train"].mean(0)
        rows.append({"from": a, "to": b, "method": "random", "note": "", "accuracy": float(
            np.mean(head_logits(head, mapped.astype(np.float32)).argmax(1) == labels["test"]))})
        guesses = rng.integers(0, own.shape[1], len(labels["test"]))
        rows.append({"from": a, "to": b, "method": "random label", "note": "",
                     "accuracy": float(np.mean(guesses == labels["test"]))})
        # the CCA family maps into a canonical space, not model 2's: nothing to inject
        for method in [m for m in methods if m not in ("cca", "svcca", "pwcca")]:
            train_a, train_b = features[a]["train"], features[b]["train"]
            unfit = alignment_pairs.unfit(method, len(train_a), train_a.shape[1], train_b.shape[1])
            rows.append({"from": a, "to": b, "method": method, "accuracy": np.nan,
                         "note": unfit})
            if not unfit:
                maps.append((len(rows) - 1, (train_a, train_b, features[a]["test"], method)))
    # every map fitted at once: the network maps side by side in worker processes
    mapped_all = alignment_pairs.fit_each(
        functools.partial(alignment.fit_transform, seed=seed), [job for _, job in maps],
        [job[3] for _, job in maps])
    for (row, _), mapped in zip(maps, mapped_all):
        head = heads[rows[row]["to"]]
        rows[row]["accuracy"] = float(np.mean(
            head_logits(head, mapped.astype(np.float32)).argmax(1) == labels["test"]))
    return pd.DataFrame(rows)
