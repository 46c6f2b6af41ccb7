"""Fine-tune a model on a classification (or regression) task, reproducibly, with a cache.

Tasks (:func:`load_task`) come with train / validation / test splits drawn deterministically:

* offline: ``tweets-sentiment`` (3 classes) and ``bbc-topic`` (5 classes; sentences, headlines
  or whole articles as inputs);
* online (GLUE through ``datasets``): ``sst2``, ``mnli``, ``qnli``, ``qqp``, ``rte``, ``mrpc``,
  ``cola`` and ``stsb`` (regression). GLUE's test labels are hidden, so its validation split is
  cut in two halves for validation and test.
* your own: :func:`task_from_corpus`, :func:`task_from_frame`.

:func:`finetune` trains any model :func:`analysis_lib.models.load` understands: the base
encoder is loaded as usual and a freshly initialised task head (seeded) is put on top, exactly
as ``AutoModelForSequenceClassification`` would build it. Training is AdamW with linear warmup
and decay over length-bucketed batches with dynamic padding. The result is saved (safetensors
weights, config, tokenizer and a JSON record of every setting, the metrics and the library
version) under a key of everything that changes it; asking again loads it. The saved folder is
a normal model folder, so ``models.load(str(result.path))`` and ``extract`` treat the
fine-tuned encoder like any other model.

Phang et al.'s configurations are built from :func:`predict` with ``keep_layers`` /
``skip`` (TUNED: the fine-tuned model truncated, with its own head) and :func:`linear_probe`
(UNTUNED on the base model, TUNEDORIG on the fine-tuned encoder: a fresh logistic regression on
one layer's features).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
import uuid
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from . import __version__
from .cache import default_root, make_key, sha256_file
from .corpora import Corpus, load_corpus
from .errors import OfflineError, offline_message
from .models import LoadedModel, load

# --------------------------------------------------------------------------- tasks


@dataclass
class Split:
    """One split: the inputs (a text, or a pair of texts) and their labels."""

    texts: list[str]
    labels: np.ndarray
    pairs: list[str] | None = None  # second text of each example (paired tasks)

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, idx: Sequence[int]) -> Split:
        idx = list(idx)
        return Split([self.texts[i] for i in idx], self.labels[idx],
                     None if self.pairs is None else [self.pairs[i] for i in idx])


@dataclass
class Task:
    """A supervised task with deterministic splits.

    Attributes
    ----------
    name : str
    train, validation, test : Split
    label_names : list of str (empty for regression)
    regression : bool
    meta : dict
        What identifies the splits (source, sizes, seed); part of the fine-tuning cache key.
    """

    name: str
    train: Split
    validation: Split
    test: Split
    label_names: list[str]
    regression: bool = False
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def num_labels(self) -> int:
        return 1 if self.regression else len(self.label_names)

    def majority_baseline(self, split: str = "test") -> float:
        """Accuracy of always predicting the training set's most frequent class (for
        regression: NaN, there is no majority class)."""
        if self.regression:
            return float("nan")
        majority = np.bincount(self.train.labels.astype(int)).argmax()
        return float(np.mean(getattr(self, split).labels == majority))

    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for split in (self.train, self.validation, self.test):
            digest.update(json.dumps([split.texts, split.pairs], ensure_ascii=False).encode())
            digest.update(np.asarray(split.labels, dtype=np.float64).tobytes())
        return digest.hexdigest()[:24]


OFFLINE_TASKS = ("tweets-sentiment", "bbc-topic")
GLUE_TASKS = {  # name: (config, text column(s), label names; empty = regression)
    "sst2": ("sst2", ("sentence",), ["negative", "positive"]),
    "mnli": ("mnli", ("premise", "hypothesis"), ["entailment", "neutral", "contradiction"]),
    "qnli": ("qnli", ("question", "sentence"), ["entailment", "not_entailment"]),
    "qqp": ("qqp", ("question1", "question2"), ["not_duplicate", "duplicate"]),
    "rte": ("rte", ("sentence1", "sentence2"), ["entailment", "not_entailment"]),
    "mrpc": ("mrpc", ("sentence1", "sentence2"), ["not_equivalent", "equivalent"]),
    "cola": ("cola", ("sentence",), ["unacceptable", "acceptable"]),
    "stsb": ("stsb", ("sentence1", "sentence2"), []),
}
TASKS = OFFLINE_TASKS + tuple(GLUE_TASKS)


def _sizes(n: int, n_train, n_val, n_test) -> tuple[int, int, int]:
    if n_train is None and n_val is None and n_test is None:
        n_val = n_test = max(1, n // 10)
        n_train = n - n_val - n_test
    n_train = n_train if n_train is not None else n - (n_val or 0) - (n_test or 0)
    n_val = n_val if n_val is not None else min(1000, max(1, n_train // 8))
    n_test = n_test if n_test is not None else min(2000, max(1, n_train // 4))
    for label, value in (("n_train", n_train), ("n_val", n_val), ("n_test", n_test)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{label} must be a positive integer, got {value!r}")
    if n_train + n_val + n_test > n:
        raise ValueError(f"the task has {n} examples; n_train + n_val + n_test = "
                         f"{n_train + n_val + n_test} is too many")
    return n_train, n_val, n_test


def task_from_corpus(corpus: Corpus, *, name: str | None = None, n_train: int | None = None,
                     n_val: int | None = None, n_test: int | None = None, seed: int = 0
                     ) -> Task:
    """A classification task from a labelled :class:`Corpus`: the examples are shuffled with
    ``seed`` and cut into train, validation and test (by default 80/10/10)."""
    if corpus.labels is None:
        raise ValueError(f"corpus {corpus.name!r} has no labels; a task needs one label per "
                         "sentence (corpora.from_sentences(texts, labels=...))")
    labels = np.asarray(corpus.labels)
    if len(np.unique(labels)) < 2:
        raise ValueError(f"corpus {corpus.name!r} has a single class; a classification task "
                         "needs at least two")
    n_train, n_val, n_test = _sizes(len(corpus), n_train, n_val, n_test)
    order = np.random.default_rng(seed).permutation(len(corpus))
    texts = corpus.texts
    pairs = corpus.text_pairs
    if pairs is not None:
        texts = [a for a, _ in pairs]
    whole = Split(list(texts), labels, None if pairs is None else [b for _, b in pairs])
    cuts = np.cumsum([n_train, n_val, n_test])
    train, val, test = (whole.subset(order[a:b]) for a, b in zip([0, *cuts[:2]], cuts))
    names = corpus.label_names or [str(i) for i in range(int(labels.max()) + 1)]
    return Task(name or corpus.name, train, val, test, list(names),
                meta={"corpus": corpus.meta, "corpus_fingerprint": corpus.fingerprint(),
                      "sizes": [n_train, n_val, n_test], "seed": seed})


def task_from_frame(frame, *, text: str = "text", label: str = "label", pair: str | None = None,
                    name: str = "custom", **sizes: Any) -> Task:
    """A task from a pandas DataFrame with a text column (and optionally a second text column
    for pairs) and a label column."""
    missing = [c for c in (text, label, pair) if c is not None and c not in frame.columns]
    if missing:
        raise ValueError(f"column(s) {missing} not in the table; its columns are "
                         f"{list(frame.columns)} (pass text=..., label=... to name them)")
    from .corpora import from_sentences

    corpus = from_sentences([str(t) for t in frame[text]], labels=list(frame[label]), name=name)
    if pair is not None:
        corpus.text_pairs = list(zip(corpus.texts, [str(t) for t in frame[pair]]))
    return task_from_corpus(corpus, name=name, **sizes)


def load_task(name: str, *, n_train: int | None = None, n_val: int | None = None,
              n_test: int | None = None, seed: int = 0, unit: str = "sentence") -> Task:
    """A named task with deterministic splits.

    Parameters
    ----------
    name : str
        One of :data:`TASKS`.
    n_train, n_val, n_test : int, optional
        Split sizes (defaults: offline tasks 80/10/10 of everything; GLUE: the whole train
        split, and the validation split cut in halves for validation and test).
    seed : int
        Seed of the shuffle that draws the splits.
    unit : {'sentence', 'headline', 'article'}
        ``bbc-topic`` only: what one input is.
    """
    if name == "tweets-sentiment":
        return task_from_corpus(load_corpus("tweets"), name=name, n_train=n_train, n_val=n_val,
                                n_test=n_test, seed=seed)
    if name == "bbc-topic":
        task = task_from_corpus(load_corpus("bbc-news", unit=unit), name=name, n_train=n_train,
                                n_val=n_val, n_test=n_test, seed=seed)
        task.meta["unit"] = unit
        return task
    if name in GLUE_TASKS:
        return _glue_task(name, n_train, n_val, n_test, seed)
    raise ValueError(f"unknown task {name!r}; valid: {', '.join(TASKS)}. For your own data "
                     "use finetune.task_from_corpus(...) or finetune.task_from_frame(...)")


def _glue_task(name, n_train, n_val, n_test, seed) -> Task:
    config, columns, label_names = GLUE_TASKS[name]
    try:
        import datasets

        train = datasets.load_dataset("nyu-mll/glue", config, split="train")
        val_split = "validation_matched" if name == "mnli" else "validation"
        val = datasets.load_dataset("nyu-mll/glue", config, split=val_split)
    except Exception as error:
        raise OfflineError(offline_message("corpus", f"glue/{name}", error)) from error

    def split(data, idx):
        rows = data.select([int(i) for i in idx])
        labels = np.asarray(rows["label"], dtype=np.float32 if not label_names else np.int64)
        pairs = list(rows[columns[1]]) if len(columns) == 2 else None
        return Split(list(rows[columns[0]]), labels, pairs)

    rng = np.random.default_rng(seed)
    train_idx = rng.permutation(len(train))[:n_train]
    val_idx = rng.permutation(len(val))
    half = len(val_idx) // 2
    v, t = val_idx[:half][:n_val], val_idx[half:][:n_test]
    return Task(name, split(train, train_idx), split(val, v), split(val, t), label_names,
                regression=not label_names,
                meta={"glue": config, "sizes": [len(train_idx), len(v), len(t)], "seed": seed})


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class FinetuneConfig:
    """Every choice that changes a fine-tuned model.

    Attributes
    ----------
    batch_size, learning_rate, epochs : training schedule; ``max_steps`` (if set) stops
        earlier and sets the schedule's length.
    warmup_steps, warmup_ratio : linear warmup length (steps, or a share of all steps).
    weight_decay : AdamW weight decay (not applied to biases and LayerNorm weights).
    max_length : token limit of an input.
    seed : seeds the task head's initialisation, dropout and the batch order.
    freeze_embeddings : bool
    freeze_bottom, freeze_top : int, number of transformer layers frozen from the bottom/top.
    freeze_layers : tuple of int, 0-based transformer layers frozen in addition.
    bucket_factor : batches are drawn from buckets of ``bucket_factor * batch_size`` examples
        of similar length (dynamic padding).
    """

    batch_size: int = 16
    learning_rate: float = 5e-5
    epochs: float = 2.0
    max_steps: int | None = None
    warmup_steps: int = 0
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_length: int = 128
    seed: int = 0
    freeze_embeddings: bool = False
    freeze_bottom: int = 0
    freeze_top: int = 0
    freeze_layers: tuple[int, ...] = ()
    bucket_factor: int = 50
    eval_batch_size: int = 64


#: The papers' settings, and a small one for this book's CPU runs.
PRESETS = {
    # Wu et al. 2020, App. D: batch 8, learning rate 5e-5, 3 epochs
    "wu2020": FinetuneConfig(batch_size=8, learning_rate=5e-5, epochs=3, warmup_ratio=0.0),
    # Phang et al. 2021: batch 4, learning rate 1e-5, 1,000 warmup steps, up to 10,000 steps
    "phang2021": FinetuneConfig(batch_size=4, learning_rate=1e-5, epochs=100,
                                max_steps=10_000, warmup_steps=1000, warmup_ratio=0.0),
    # this book on a 2-core CPU: 2,000 examples x 2 epochs in a few minutes
    "cpu": FinetuneConfig(batch_size=16, learning_rate=5e-5, epochs=2, warmup_ratio=0.1,
                          max_length=128),
}


def preset(name: str, **changes: Any) -> FinetuneConfig:
    """A preset of :data:`PRESETS` with some fields changed."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; valid: {', '.join(PRESETS)}")
    return replace(PRESETS[name], **changes)


# --------------------------------------------------------------------------- model parts


def layer_list(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The ModuleList of transformer layers of a (task or base) model."""
    base = getattr(model, "base_model", model)
    n = getattr(base.config, "num_hidden_layers", None) or getattr(base.config, "n_layer", None)
    candidates = [m for m in base.modules() if isinstance(m, torch.nn.ModuleList)
                  and len(m) == n]
    if not candidates:
        raise ValueError(f"cannot find the {n} transformer layers of {type(base).__name__}")
    return candidates[0]


def _embedding_parameters(model: torch.nn.Module) -> list[tuple[str, torch.nn.Parameter]]:
    base = getattr(model, "base_model", model)
    keys = ("embed", "wte", "wpe", "mask_emb")
    return [(n, p) for n, p in base.named_parameters() if any(k in n for k in keys)]


def frozen_parameters(model: torch.nn.Module, config: FinetuneConfig) -> set[str]:
    """Names of the parameters that ``config`` freezes (relative to ``model``)."""
    layers = layer_list(model)
    n = len(layers)
    if getattr(model.config, "model_type", "") == "albert" and (
            config.freeze_bottom or config.freeze_top or config.freeze_layers):
        raise ValueError("ALBERT shares one set of weights across all layers; freezing single "
                         "layers is not possible (freeze the embeddings only)")
    for label, k in (("freeze_bottom", config.freeze_bottom), ("freeze_top", config.freeze_top)):
        if not 0 <= k <= n:
            raise ValueError(f"{label}={k} but the model has {n} transformer layers")
    bad = [i for i in config.freeze_layers if not 0 <= i < n]
    if bad:
        raise ValueError(f"freeze_layers {bad} out of range: the model has layers 0..{n - 1}")
    chosen = set(range(config.freeze_bottom)) | set(range(n - config.freeze_top, n)) | set(
        config.freeze_layers)
    owner = {id(p): name for name, p in model.named_parameters()}
    names = {owner[id(p)] for i in chosen for p in layers[i].parameters()}
    if config.freeze_embeddings:
        names |= {owner[id(p)] for _, p in _embedding_parameters(model)}
    return names


# --------------------------------------------------------------------------- training


@dataclass
class FineTuned:
    """A fine-tuned model: where it is saved, the model itself and its record."""

    path: Path
    model: torch.nn.Module
    tokenizer: Any
    record: dict[str, Any]
    from_cache: bool = False

    @property
    def metrics(self) -> dict[str, float]:
        return self.record["metrics"]

    def load(self) -> LoadedModel:
        """The fine-tuned encoder through :func:`analysis_lib.models.load` (for extract)."""
        return load(str(self.path))


def _task_model(base: LoadedModel, num_labels: int, regression: bool, seed: int):
    from transformers import AutoModelForSequenceClassification

    config = base.model.config.__class__.from_dict(base.model.config.to_dict())
    config.num_labels = num_labels
    config.problem_type = "regression" if regression else "single_label_classification"
    if config.pad_token_id is None:
        config.pad_token_id = base.tokenizer.pad_token_id
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForSequenceClassification.from_config(config,
                                                               attn_implementation="eager")
    missing, unexpected = model.base_model.load_state_dict(base.model.state_dict(), strict=False)
    # a task head may bring its own pooler (BERT) or drop the base one (RoBERTa, ELECTRA)
    if [k for k in unexpected + missing if "pooler" not in k]:
        raise RuntimeError(f"base weights do not fit the task model: missing {missing[:5]}, "
                           f"unexpected {unexpected[:5]}")
    return model


def _encode_split(tokenizer, split: Split, max_length: int) -> list[list[int]]:
    if split.pairs is None:
        enc = tokenizer(split.texts, truncation=True, max_length=max_length)
    else:
        enc = tokenizer(split.texts, split.pairs, truncation=True, max_length=max_length)
    return enc["input_ids"]


def _collate(ids: list[list[int]], rows: Sequence[int], pad_id: int):
    width = max(len(ids[r]) for r in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for k, r in enumerate(rows):
        input_ids[k, : len(ids[r])] = torch.tensor(ids[r])
        mask[k, : len(ids[r])] = 1
    return input_ids, mask


def bucketed_batches(lengths: np.ndarray, batch_size: int, bucket: int,
                     rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffled batches of examples of similar length: shuffle, cut into buckets of
    ``bucket * batch_size`` examples, sort each by length, cut into batches, shuffle the
    batches."""
    order = rng.permutation(len(lengths))
    batches = []
    size = bucket * batch_size
    for start in range(0, len(order), size):
        chunk = order[start:start + size]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def _param_groups(model, frozen: set[str], weight_decay: float):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if name in frozen:
            p.requires_grad_(False)
            continue
        p.requires_grad_(True)
        (no_decay if p.ndim < 2 or "LayerNorm" in name or "layer_norm" in name or "ln_" in name
         else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def train(model, tokenizer, task: Task, config: FinetuneConfig, *, progress: bool = True
          ) -> list[dict[str, float]]:
    """Train ``model`` in place on ``task.train``; returns the per-epoch history."""
    from transformers import get_linear_schedule_with_warmup

    frozen = frozen_parameters(model, config)
    groups = _param_groups(model, frozen, config.weight_decay)
    optimizer = torch.optim.AdamW(groups, lr=config.learning_rate)
    ids = _encode_split(tokenizer, task.train, config.max_length)
    lengths = np.array([len(x) for x in ids])
    labels = torch.tensor(task.train.labels,
                          dtype=torch.float32 if task.regression else torch.long)
    rng = np.random.default_rng(config.seed)
    per_epoch = int(np.ceil(len(ids) / config.batch_size))
    total = int(np.ceil(per_epoch * config.epochs))
    if config.max_steps is not None:
        total = min(total, config.max_steps)
    warmup = config.warmup_steps or int(round(config.warmup_ratio * total))
    scheduler = get_linear_schedule_with_warmup(optimizer, warmup, total)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    history, step = [], 0
    bar = tqdm(total=total, desc=f"fine-tune {task.name}", unit="step", disable=not progress)
    model.train()
    start = time.perf_counter()
    seen = 0
    while step < total:
        losses = []
        for rows in bucketed_batches(lengths, config.batch_size, config.bucket_factor, rng):
            if step >= total:
                break
            input_ids, mask = _collate(ids, rows, pad)
            out = model(input_ids=input_ids, attention_mask=mask, labels=labels[rows])
            out.loss.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(out.loss.item())
            step += 1
            seen += len(rows)
            bar.update(1)
            bar.set_postfix(loss=f"{np.mean(losses[-20:]):.3f}",
                            ex_per_s=f"{seen / (time.perf_counter() - start):.1f}")
        history.append({"epoch": len(history) + 1, "steps": step,
                        "train_loss": float(np.mean(losses)) if losses else float("nan")})
    bar.close()
    model.eval()
    return history


def predict(model, tokenizer, split: Split, *, max_length: int = 128, batch_size: int = 64,
            keep_layers: int | None = None, skip: tuple[int, int] | None = None
            ) -> np.ndarray:
    """Logits (n x num_labels) of a task model on a split, optionally with layers removed.

    Parameters
    ----------
    keep_layers : int, optional
        Keep only the bottom ``keep_layers`` transformer layers and feed the last kept layer's
        output through the model's own head (for BERT-like models: the pooler on the first
        token, then the classifier). Phang et al.'s TUNED configuration.
    skip : (start, stop), optional
        Leave out the contiguous transformer layers ``start <= i < stop`` (Phang et al. §4.1).
        ``(k, k)`` skips nothing.
    """
    ids = _encode_split(tokenizer, split, max_length)
    lengths = np.array([len(x) for x in ids])
    order = np.argsort(-lengths, kind="stable")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    out = None
    with _layers_subset(model, keep_layers, skip), torch.inference_mode():
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            input_ids, mask = _collate(ids, rows, pad)
            logits = model(input_ids=input_ids, attention_mask=mask).logits.float().numpy()
            if out is None:
                out = np.empty((len(ids), logits.shape[1]), dtype=np.float32)
            out[rows] = logits
    return out


@contextlib.contextmanager
def _layers_subset(model, keep_layers: int | None, skip: tuple[int, int] | None
                   ) -> Iterator[None]:
    if keep_layers is None and skip is None:
        yield
        return
    layers = layer_list(model)
    n = len(layers)
    kept = list(range(n))
    if keep_layers is not None:
        if not 1 <= keep_layers <= n:
            raise ValueError(f"keep_layers must be in 1..{n}, got {keep_layers}")
        kept = kept[:keep_layers]
    if skip is not None:
        a, b = skip
        if not 0 <= a <= b <= n or (b - a) >= len(kept):
            raise ValueError(f"skip must be (start, stop) with 0 <= start <= stop <= {n} "
                             f"leaving at least one layer, got {skip}")
        kept = [i for i in kept if not a <= i < b]
    parent, attr = _owner_of(model, layers)
    setattr(parent, attr, torch.nn.ModuleList([layers[i] for i in kept]))
    try:
        yield
    finally:
        setattr(parent, attr, layers)


def _owner_of(model, target):
    for module in model.modules():
        for name, child in module.named_children():
            if child is target:
                return module, name
    raise ValueError("layer list not found in the model")


def evaluate(model, tokenizer, task: Task, split: str = "test", **predict_options: Any
             ) -> dict[str, float]:
    """Accuracy and macro-F1 (regression: Pearson and Spearman) with the majority baseline."""
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import f1_score

    data = getattr(task, split)
    logits = predict(model, tokenizer, data, **predict_options)
    if task.regression:
        pred = logits[:, 0]
        return {"pearson": float(pearsonr(pred, data.labels)[0]),
                "spearman": float(spearmanr(pred, data.labels)[0]), "n": len(data)}
    pred = logits.argmax(axis=1)
    return {"accuracy": float(np.mean(pred == data.labels)),
            "macro_f1": float(f1_score(data.labels, pred, average="macro", zero_division=0)),
            "majority_baseline": task.majority_baseline(split), "n": len(data)}


def finetune(model: str, task: Task | str, config: FinetuneConfig | str = "cpu", *,
             cache: bool = True, cache_dir: str | os.PathLike | None = None,
             progress: bool = True, **load_options: Any) -> FineTuned:
    """Fine-tune ``model`` on ``task``, or load the result of an identical earlier run.

    Parameters
    ----------
    model : str
        Any name :func:`analysis_lib.models.load` understands (with ``load_options``).
    task : Task or str
        A task, or a name for :func:`load_task` (with its default splits).
    config : FinetuneConfig or str
        Settings, or the name of a preset (``"cpu"``, ``"wu2020"``, ``"phang2021"``).

    Returns
    -------
    FineTuned
        Its ``record`` holds every setting, the per-epoch loss, validation and test metrics
        with the majority baseline, the training time and the library version.
    """
    if isinstance(config, str):
        config = preset(config)
    if isinstance(task, str):
        task = load_task(task)
    base = load(model, **load_options)
    settings = asdict(config)
    key = make_key(kind="finetune", base=base.info.fingerprint, task=task.name,
                   task_data=task.fingerprint(), config=settings)
    root = default_root(cache_dir) / "finetune"
    path = root / key
    if cache:
        hit = _load_saved(path)
        if hit is not None:
            return hit
    task_model = _task_model(base, task.num_labels, task.regression, config.seed)
    frozen = frozen_parameters(task_model, config)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        start = time.perf_counter()
        history = train(task_model, base.tokenizer, task, config, progress=progress)
        seconds = time.perf_counter() - start
    kw = dict(max_length=config.max_length, batch_size=config.eval_batch_size)
    metrics = {"validation": evaluate(task_model, base.tokenizer, task, "validation", **kw),
               "test": evaluate(task_model, base.tokenizer, task, "test", **kw)}
    record = {"base_model": base.info.to_dict(), "task": task.name, "task_meta": task.meta,
              "task_fingerprint": task.fingerprint(), "label_names": task.label_names,
              "config": settings, "frozen_parameters": sorted(frozen), "history": history,
              "metrics": metrics, "train_seconds": seconds,
              "train_examples": len(task.train), "library_version": __version__,
              "torch_version": torch.__version__}
    if cache:
        _save(path, task_model, base.tokenizer, record)
    return FineTuned(path, task_model, base.tokenizer, record)


def _save(path: Path, model, tokenizer, record: dict[str, Any]) -> None:
    """Write the model folder atomically: a temporary folder, then one rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".tmp-{path.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        weights = sorted(tmp.glob("*.safetensors"))
        record = {**record, "checksums": {w.name: sha256_file(w) for w in weights}}
        (tmp / "record.json").write_text(json.dumps(record, indent=1, default=str))
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)
        try:
            os.rename(tmp, path)
        except OSError:
            if _load_saved(path, quiet=True) is None:
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _load_saved(path: Path, quiet: bool = False) -> FineTuned | None:
    if not path.exists():
        return None
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    try:
        record = json.loads((path / "record.json").read_text())
        for name, digest in record["checksums"].items():
            if sha256_file(path / name) != digest:
                raise ValueError(f"checksum mismatch in {name}")
        model = AutoModelForSequenceClassification.from_pretrained(
            path, attn_implementation="eager", local_files_only=True).eval()
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as error:
        if not quiet:
            warnings.warn(f"saved fine-tuned model {path} is damaged ({error}); it will be "
                          "trained again", RuntimeWarning, stacklevel=3)
            shutil.rmtree(path, ignore_errors=True)
        return None
    return FineTuned(path, model, tokenizer, record, from_cache=True)


# --------------------------------------------------------------------------- probes


def linear_probe(model: str | LoadedModel, task: Task, layer: int, *, pooling: str = "first",
                 max_train: int | None = None, C: float = 1.0, seed: int = 0,
                 **extract_options: Any) -> dict[str, float]:
    """Fit a fresh logistic regression on one layer's sentence vectors and score it on test.

    ``model`` is any model (the base model gives Phang et al.'s UNTUNED configuration, a
    fine-tuned encoder ``FineTuned.load()`` gives TUNEDORIG). ``pooling`` is ``"first"``
    (first token, [CLS] for BERT-like models) or ``"mean"``. Features are standardised.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from .corpora import from_sentences
    from .extract import extract

    if task.regression:
        raise ValueError("linear_probe fits a classifier; the task is a regression")
    if pooling not in ("first", "mean"):
        raise ValueError(f"pooling must be 'first' or 'mean', got {pooling!r}")
    loaded = model if isinstance(model, LoadedModel) else load(model)
    if not 0 <= layer < loaded.info.n_layers:
        raise ValueError(f"layer must be in 0..{loaded.info.n_layers - 1}, got {layer}")
    train = task.train if max_train is None else task.train.subset(range(min(max_train,
                                                                             len(task.train))))

    def features(split: Split) -> np.ndarray:
        corpus = from_sentences(split.texts if split.pairs is None else
                                [f"{a} {b}" for a, b in zip(split.texts, split.pairs)])
        result = extract(loaded, corpus, progress=False, **extract_options)
        return (result.sentence_first if pooling == "first" else result.sentence_mean)[layer]

    clf = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=2000,
                                                             random_state=seed))
    clf.fit(features(train), train.labels)
    pred = clf.predict(features(task.test))
    return {"accuracy": float(np.mean(pred == task.test.labels)),
            "macro_f1": float(f1_score(task.test.labels, pred, average="macro",
                                       zero_division=0)),
            "majority_baseline": task.majority_baseline("test"), "layer": layer}
