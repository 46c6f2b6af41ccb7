"""A task model's own head, as a function of one layer's first-token vector.

The sequence-classification heads of BERT, ALBERT, RoBERTa, ELECTRA and DistilBERT read only
the first token's final vector: BERT and ALBERT through their pooler (dense + tanh) then a
classifier, RoBERTa and ELECTRA through a dense + activation + projection, DistilBERT through
a pre-classifier + ReLU. :class:`FirstTokenHead` applies that same head to the first-token
vector of *any* layer, which is how Phang et al. read a truncated model (UNTUNED: the tuned
head, unchanged), and :func:`fit_head` re-trains it on a layer (TUNED, TUNEDORIG) from cached
vectors, without running the encoder again. Heads that read another token (GPT-2's last
token, XLNet's summary) are refused with a pointer to the logistic-regression probe.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from ..runtime.device import fused_optimizer
from ..runtime.threads import one_thread

FIRST_TOKEN_FAMILIES = ("bert", "albert", "roberta", "electra", "distilbert")


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


def fit_head(head: torch.nn.Module, train: np.ndarray, labels: np.ndarray,
             validation: np.ndarray, val_labels: np.ndarray, *, epochs: int = 30,
             batch_size: int = 32, learning_rate: float = 1e-3, weight_decay: float = 0.01,
             seed: int = 0) -> dict[str, float]:
    """Train ``head`` in place on fixed first-token vectors (cross-entropy, AdamW), keeping
    the weights of the epoch with the best validation accuracy. Deterministic for a seed.
    Returns ``{"epoch": best epoch, "validation_accuracy": ...}``."""
    labels_t = torch.as_tensor(np.asarray(labels), dtype=torch.long)
    x = torch.as_tensor(np.asarray(train), dtype=torch.float32)
    if len(x) != len(labels_t):
        raise ValueError(f"{len(x)} training vectors for {len(labels_t)} labels")
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
