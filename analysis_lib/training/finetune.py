"""Fine-tune a model on a task, reproducibly, with a cache shared by every study.

:func:`finetune` trains any model :func:`analysis_lib.models.load` understands: the base
encoder is loaded as usual and a freshly initialised task head (seeded) is put on top, exactly
as ``AutoModelForSequenceClassification`` would build it, then trained by the library's one
loop (:mod:`analysis_lib.training.loop`) over length-bucketed batches with dynamic padding.
The result is saved (safetensors weights, config, tokenizer and a JSON record of every
setting, the metrics and the library version) under a key of everything that changes it;
asking again, from any study, loads it. The saved folder is a normal model folder, so
``models.load(str(result.path))`` and ``extract`` treat the fine-tuned encoder like any other
model. A run with frozen layers can keep only the weights it trained (``store="trainable"``:
about a quarter of a MiniLM run with its bottom half frozen); its folder is then read back
through :func:`finetune`, which has the base model the frozen weights come from, and
``result.load()`` gives its encoder. On the CPU a model trains and is evaluated at
:data:`CPU_THREADS` torch threads whatever the machine has, so that the same key gives the
same weights on every machine.

:func:`predict` runs a task model with layers removed (:mod:`analysis_lib.training.surgery`):
``layer=l`` keeps transformer layers ``1..l`` and feeds layer ``l`` through the model's own
head (Phang et al.'s TUNED configuration without retraining), ``skip=(first, last)`` leaves out
an inclusive span of layers.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .. import __version__
from ..data.tasks import Split, Task, load_task
from ..layers import check_layer
from ..models import LoadedModel, load
from ..models.batching import pad_batch, pad_token_id
from ..models.info import hidden_size, model_info, weights_digest
from ..models.loading import TRAINABLE_WEIGHTS
from ..runtime import checks
from ..runtime.cache import (
    claimed,
    code_digest,
    default_root,
    folder_checksums,
    make_key,
    publish_folder,
)
from ..runtime.device import (
    TRAINING_PRECISIONS,
    DeviceLike,
    autocast,
    fork_rng,
    key_parts,
    model_device,
    resolve,
    training_precision,
)
from ..runtime.device import key as device_key
from ..runtime.profile import label, profiled
from ..runtime.quiet import quiet_transformers
from ..runtime.threads import torch_threads
from . import loop, plateau
from .surgery import frozen_parameters, n_transformer_layers, removed_layers

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

# --------------------------------------------------------------------------- settings

#: torch threads a model fine-tunes with on the CPU (part of the cache key). A product's
#: result depends on how it is split between threads, so at a free count a machine with
#: more cores would train other weights under the same key. Two: the speed of the 2-core
#: machines the book is built on; a larger machine can train several models at once.
CPU_THREADS = 2


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
    freeze_embeddings : bool, freeze layer 0 (the embeddings).
    freeze_bottom, freeze_top : int, number of transformer layers frozen from the bottom
        (layers ``1..k``) or the top (layers ``L-k+1..L``).
    freeze_layers : tuple of int, layers frozen in addition, by the library's convention
        (``0`` = embeddings, ``1..L`` = transformer layers).
    bucket_factor : batches are drawn from buckets of ``bucket_factor * batch_size`` examples
        of similar length (dynamic padding).
    until_plateau : bool, stop after the first epoch at which the validation accuracy has
        reached its plateau (:func:`~analysis_lib.training.plateau.plateaued`, on the number
        of validation examples); ``epochs`` (or ``max_steps``) is then the most it trains,
        and the learning rate decays over that whole length, as early stopping does. The
        run keeps the weights of its best epoch (:func:`kept_epoch`; the record's
        ``kept_epoch``). A regression task has no accuracy and trains its whole schedule.
    precision : {'float32', 'bfloat16', 'auto'}
        What the training steps' forward pass and loss compute in
        (:func:`~analysis_lib.runtime.device.training_precision`: ``"auto"`` is bfloat16
        autocast on a CPU that computes it natively, for models at least
        :data:`~analysis_lib.runtime.device.BF16_MIN_WIDTH` wide, and float32 elsewhere, a
        GPU and narrower models included, where it was measured faster). A run records, and
        is cached under, the precision it trained in. The learning curve (the validation
        scores after each epoch, which early stopping and the training gate read) is
        evaluated in that precision too: in bfloat16 it takes about a third of float32's
        time for MiniLM, and moves a score by a few of 500 examples, far below the
        difference a curve is judged by. The test scores, and every extraction, are
        computed in float32.
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
    until_plateau: bool = False
    precision: str = "float32"


#: The papers' settings, and a small one for this book's CPU runs.
PRESETS = {
    # Wu et al. 2020, App. D: batch 8, learning rate 5e-5, 3 epochs
    "wu2020": FinetuneConfig(batch_size=8, learning_rate=5e-5, epochs=3, warmup_ratio=0.0),
    # Phang et al. 2021: batch 4, learning rate 1e-5, 1,000 warmup steps, up to 10,000 steps
    "phang2021": FinetuneConfig(batch_size=4, learning_rate=1e-5, epochs=100,
                                max_steps=10_000, warmup_steps=1000, warmup_ratio=0.0),
    # this book on a 2-core CPU: a few hundred examples x 2 epochs in a few minutes. With about
    # 75 optimizer steps, 5e-5 (the usual rate for thousands of steps) leaves MiniLM below a
    # head trained on its frozen top layer; of 5e-5, 1e-4 and 2e-4, 2e-4 gave the best mean
    # validation accuracy over both tasks (600 examples, seed 0; figures in book/running.md)
    "cpu": FinetuneConfig(batch_size=16, learning_rate=2e-4, epochs=2, warmup_ratio=0.1,
                          max_length=128),
}


def frozen_layers(config: FinetuneConfig, n: int) -> set[int]:
    """The layers (``0`` = embeddings, ``1..n``) that ``config`` freezes in a model with ``n``
    transformer layers."""
    for setting, k in (("freeze_bottom", config.freeze_bottom), ("freeze_top", config.freeze_top)):
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= n:
            raise ValueError(f"{setting}={k!r} but the model has {n} transformer layers; use "
                             f"0..{n}")
    for x in config.freeze_layers:
        check_layer(x, n, "freeze_layers item")
    layers = set(range(1, config.freeze_bottom + 1)) | set(range(n - config.freeze_top + 1,
                                                                  n + 1))
    layers |= set(config.freeze_layers) | ({0} if config.freeze_embeddings else set())
    return layers


def check_config(config: FinetuneConfig) -> FinetuneConfig:
    """``config`` if its schedule is possible, else a ``ValueError`` naming the field."""
    positive = {"batch_size": config.batch_size, "eval_batch_size": config.eval_batch_size,
                "max_length": config.max_length, "bucket_factor": config.bucket_factor}
    for name, value in positive.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"FinetuneConfig.{name} must be a positive integer, got {value!r}")
    if not config.epochs > 0:
        raise ValueError(f"FinetuneConfig.epochs must be > 0, got {config.epochs!r}: a model "
                         "trained for zero epochs is not fine-tuned")
    if config.max_steps is not None and config.max_steps < 1:
        raise ValueError(f"FinetuneConfig.max_steps must be None or >= 1, got "
                         f"{config.max_steps!r}")
    if not config.learning_rate > 0:
        raise ValueError(f"FinetuneConfig.learning_rate must be > 0, got "
                         f"{config.learning_rate!r}")
    if config.precision not in TRAINING_PRECISIONS:
        raise ValueError(f"FinetuneConfig.precision must be one of {TRAINING_PRECISIONS}, "
                         f"got {config.precision!r}")
    return config


def preset(name: str, **changes: Any) -> FinetuneConfig:
    """A preset of :data:`PRESETS` with some fields changed."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; valid: {', '.join(PRESETS)}")
    return replace(PRESETS[name], **changes)


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
    def metrics(self) -> dict[str, dict[str, float]]:
        return self.record["metrics"]

    def load(self) -> LoadedModel:
        """The fine-tuned encoder (for extract): through :func:`analysis_lib.models.load`, or,
        for a run that kept only its trained weights, a copy of the one in memory."""
        if not (self.path / TRAINABLE).is_file():
            return load(str(self.path))
        trained: Any = self.model  # a transformers task model
        encoder = copy.deepcopy(trained.base_model).eval()
        info = model_info(encoder, self.tokenizer, str(self.path), "local",
                          f"finetune-{self.path.name}")
        return LoadedModel(encoder, self.tokenizer, info)


def task_model(base: LoadedModel, num_labels: int, regression: bool,
               seed: int, word_level: bool = False) -> torch.nn.Module:
    """The base encoder with a freshly initialised task head (seeded): a sequence classifier
    (or regressor), or for a word-level task a token classifier."""
    from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification

    encoder: Any = base.model  # a transformers model
    config = encoder.config.__class__.from_dict(encoder.config.to_dict())
    config.num_labels = num_labels
    if not word_level:
        config.problem_type = "regression" if regression else "single_label_classification"
    if config.pad_token_id is None:
        config.pad_token_id = base.tokenizer.pad_token_id
    kind = AutoModelForTokenClassification if word_level else AutoModelForSequenceClassification
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = kind.from_config(config, attn_implementation="eager")
    missing, unexpected = model.base_model.load_state_dict(base.model.state_dict(), strict=False)
    # a task head may bring its own pooler (BERT) or drop the base one (RoBERTa, ELECTRA)
    if [k for k in unexpected + missing if "pooler" not in k]:
        raise RuntimeError(f"base weights do not fit the task model: missing {missing[:5]}, "
                           f"unexpected {unexpected[:5]}")
    return model


def encode_split(tokenizer: PreTrainedTokenizerBase, split: Split,
                 max_length: int) -> list[list[int]]:
    """Token ids of every example of a split (pairs joined by the tokenizer's template; a
    word-level split's words handed over as already split)."""
    if split.words is not None:
        return word_pieces(tokenizer, split, max_length)[0]
    if split.pairs is None:
        enc = tokenizer(split.texts, truncation=True, max_length=max_length)
    else:
        enc = tokenizer(split.texts, split.pairs, truncation=True, max_length=max_length)
    return enc["input_ids"]


def word_pieces(tokenizer: PreTrainedTokenizerBase, split: Split, max_length: int
                ) -> tuple[list[list[int]], list[np.ndarray]]:
    """A word-level split's token ids, and for each example the position of every word's
    first token (``-1`` for a word cut off by ``max_length``): a word's label is trained and
    read on its first piece, as BERT's tagging recipe does."""
    if split.words is None:
        raise ValueError("word_pieces reads a word-level split (one with words)")
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("a word-level task needs a fast tokenizer (one that maps tokens back "
                         "to words); load the model with its fast tokenizer")
    enc = tokenizer(split.words, is_split_into_words=True, truncation=True,
                    max_length=max_length)
    firsts = []
    for i, words in enumerate(split.words):
        first = np.full(len(words), -1, dtype=np.int64)
        for position, word in reversed(list(enumerate(enc.word_ids(i)))):
            if word is not None:
                first[word] = position
        firsts.append(first)
    return enc["input_ids"], firsts


def word_targets(firsts: list[np.ndarray], labels: list[np.ndarray], rows: np.ndarray,
                 width: int) -> torch.Tensor:
    """The label tensor of a batch of a word-level task: each word's label on its first
    piece, ``-100`` (ignored by the loss) on every other position."""
    out = torch.full((len(rows), width), -100, dtype=torch.long)
    for k, r in enumerate(rows):
        kept = firsts[r] >= 0
        out[k, torch.as_tensor(firsts[r][kept])] = torch.as_tensor(labels[r][kept])
    return out


def train(model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase, task: Task,
          config: FinetuneConfig, *, frozen: set[str] | frozenset[str] = frozenset(),
          progress: bool = True, device: DeviceLike = None,
          on_step: Callable[[int, float], None] | None = None) -> list[dict[str, float]]:
    """Train ``model`` in place on ``task.train`` with the library's loop, on ``device``
    (default: CUDA when available, else the CPU; the model is moved there); returns the
    per-epoch history: the training loss and the validation scores after each epoch (the
    learning curve, evaluated in the precision the run trains in; evaluation draws no
    random numbers, so the weights are the same as without it). A run that stops on its
    plateau ends with the weights of its best epoch. ``on_step(step, loss)`` is called
    after every optimizer step."""
    dev = resolve(device)
    model.to(dev)
    precision = training_precision(config.precision, dev, hidden_size(model))
    if task.word_level:
        ids, firsts = word_pieces(tokenizer, task.train, config.max_length)
        per_word = task.train.word_labels()
    else:
        ids = encode_split(tokenizer, task.train, config.max_length)
        labels = torch.tensor(task.train.labels,
                              dtype=torch.float32 if task.regression else torch.long)
    lengths = np.array([len(x) for x in ids])
    rng = np.random.default_rng(config.seed)
    per_epoch = int(np.ceil(len(ids) / config.batch_size))
    total = int(np.ceil(per_epoch * config.epochs))
    if config.max_steps is not None:
        total = min(total, config.max_steps)
    warmup = config.warmup_steps or int(round(config.warmup_ratio * total))
    pad = pad_token_id(tokenizer)

    def epoch():
        for rows in loop.bucketed_batches(lengths, config.batch_size, config.bucket_factor,
                                          rng):
            input_ids, mask = pad_batch(ids, rows, pad)
            target = (word_targets(firsts, per_word, rows, input_ids.shape[1])
                      if task.word_level else labels[rows])
            yield {"input_ids": input_ids, "attention_mask": mask, "labels": target}

    early = config.until_plateau and not task.regression and len(task.validation) > 0
    best: dict[str, Any] = {"score": -np.inf, "state": None}  # early stopping's best epoch

    def held_out() -> dict[str, float]:  # the learning curve: validation after each epoch
        with autocast(dev, precision):
            found = evaluate(model, tokenizer, task, "validation",
                             max_length=config.max_length, batch_size=config.eval_batch_size)
        if early and found["accuracy"] > best["score"]:  # the first of equal scores stays
            best["score"] = found["accuracy"]
            best["state"] = {k: v.detach().to("cpu", copy=True)
                             for k, v in model.state_dict().items()}
        return {f"validation_{k}": v for k, v in found.items()}

    def on_plateau(history: list[dict[str, float]]) -> bool:
        return plateau.plateaued(curve_of(history), len(task.validation))

    history = loop.run(model, epoch, total_steps=total, learning_rate=config.learning_rate,
                       warmup_steps=warmup, weight_decay=config.weight_decay, frozen=frozen,
                       desc=f"fine-tune {task.name}", progress=progress, device=dev,
                       on_step=on_step, on_epoch=held_out if len(task.validation) else None,
                       stop=on_plateau if early else None, precision=precision)
    if kept_epoch(config, history) < len(history):
        model.load_state_dict(best["state"])  # the weights of the best epoch
    return history


def curve_of(history: list[dict[str, float]]) -> list[float]:
    """A run's learning curve: its validation accuracy after each epoch (NaN where the
    epoch has none)."""
    return [point.get("validation_accuracy", float("nan")) for point in history]


def kept_epoch(config: FinetuneConfig, history: list[dict[str, float]]) -> int:
    """The epoch whose weights a run keeps: its best
    (:func:`~analysis_lib.training.plateau.best_epoch`) when it trained until its plateau,
    its last otherwise."""
    curve = curve_of(history)
    if config.until_plateau and np.isfinite(curve).any():
        return plateau.best_epoch(curve)
    return len(history)


def predict(model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase, split: Split, *,
            max_length: int = 128, batch_size: int = 64,
            layer: int | None = None, skip: tuple[int, int] | None = None) -> np.ndarray:
    """Logits (n x num_labels) of a task model on a split, optionally with layers removed.

    Parameters
    ----------
    layer : int, optional
        Keep transformer layers ``1..layer`` only and feed layer ``layer``'s output through
        the model's own head (for BERT-like models: the pooler on the first token, then the
        classifier). ``layer = L`` is the whole model.
    skip : (first, last), optional
        Leave out transformer layers ``first..last`` (inclusive, ``1 <= first <= last <= L``;
        Phang et al. §4.1). ``None`` or ``()`` skips nothing.

    A word-level split (``split.words``) gives one row per word, every example's words in
    order, read on the word's first token (NaN for a word cut off by ``max_length``).

    Runs on the device the model is on.
    """
    firsts = None
    if split.words is not None:
        ids, firsts = word_pieces(tokenizer, split, max_length)
    else:
        ids = encode_split(tokenizer, split, max_length)
    lengths = np.array([len(x) for x in ids])
    order = np.argsort(-lengths, kind="stable")
    pad = pad_token_id(tokenizer)
    out: np.ndarray | None = None
    words: list[np.ndarray] = [np.empty((0, 0))] * len(ids)  # a word-level split's rows
    dev = model_device(model)
    training = model.training
    model.eval()  # dropout off: predictions are deterministic
    try:
        with removed_layers(model, layer, skip), torch.inference_mode():
            for start in range(0, len(order), batch_size):
                rows = order[start:start + batch_size]
                input_ids, mask = pad_batch(ids, rows, pad)
                logits = model(input_ids=input_ids.to(dev), attention_mask=mask.to(dev)).logits
                if firsts is not None:
                    found = logits.float().cpu().numpy()
                    for k, r in enumerate(rows):
                        words[r] = np.full((len(firsts[r]), found.shape[-1]), np.nan,
                                           dtype=np.float32)
                        kept = firsts[r] >= 0
                        words[r][kept] = found[k, firsts[r][kept]]
                    continue
                if out is None:
                    out = np.empty((len(ids), logits.shape[1]), dtype=np.float32)
                out[rows] = logits.float().cpu().numpy()
    finally:
        model.train(training)
    if firsts is not None:
        return np.concatenate(words) if words else np.empty((0, 0), dtype=np.float32)
    if out is None:  # an empty split
        return np.empty((0, 0), dtype=np.float32)
    return out


def evaluate(model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase, task: Task,
             split: str = "test", **predict_options: Any
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
    # a word cut off by the token limit (NaN logits) counts as wrong
    pred = np.where(np.isnan(logits).any(axis=1), -1, np.nan_to_num(logits).argmax(axis=1))
    return {"accuracy": float(np.mean(pred == data.labels)),
            "macro_f1": float(f1_score(data.labels, pred, average="macro", zero_division=0)),
            "majority_baseline": task.majority_baseline(split), "n": len(data)}


@profiled("finetune", lambda model, task, *a, **k: f"{label(model)} on {label(task)}")
def finetune(model: str, task: Task | str, config: FinetuneConfig | str = "cpu", *,
             cache: bool = True, cache_dir: str | os.PathLike | None = None,
             progress: bool = True, device: DeviceLike = None, store: str = "full",
             **load_options: Any) -> FineTuned:
    """Fine-tune ``model`` on ``task``, or load the result of an identical earlier run.

    Parameters
    ----------
    model : str
        Any name :func:`analysis_lib.models.load` understands (with ``load_options``).
    task : Task or str
        A task, or a name for :func:`load_task` (with its default splits).
    config : FinetuneConfig or str
        Settings, or the name of a preset (``"cpu"``, ``"wu2020"``, ``"phang2021"``).
    device : str or torch.device, optional
        Where to train and evaluate (default: CUDA when available, else the CPU). A model
        trained on a GPU is cached under its own key (its weights differ by rounding).
    store : {'full', 'trainable'}
        What the cache keeps: the whole model (a folder any model loader reads), or only
        the weights that were trained, for a run with frozen layers (the frozen ones are
        the base model's; the folder is read back by :func:`finetune` only).

    Returns
    -------
    FineTuned
        Its ``record`` holds every setting, the per-epoch loss, validation and test metrics
        with the majority baseline, the training time and the library version.
    """
    config, task, base, dev = _arguments(model, task, config, device, store, cache_dir,
                                         load_options)
    path = _run_path(base, task, config, dev, store, cache_dir)
    if not cache:
        return _train_run(base, task, config, dev, store, path, progress, cache=False)
    hit = _load_saved(path, base)
    if hit is not None:
        return _placed(hit, dev)
    with claimed(path):  # a run two processes ask for at once is trained once
        hit = _load_saved(path, base)
        return _placed(hit, dev) if hit is not None else _train_run(
            base, task, config, dev, store, path, progress, cache=True)


def _placed(run: FineTuned, dev: torch.device) -> FineTuned:
    """A run read from the cache with its model on ``dev``, where a run just trained is
    too: the same call gives the model on the same device either way."""
    run.model.to(dev)
    return run


def _train_run(base: LoadedModel, task: Task, config: FinetuneConfig, dev: torch.device,
               store: str, path: Path, progress: bool, *, cache: bool) -> FineTuned:
    """Train one run of :func:`finetune` and, with ``cache``, save it at ``path``."""
    settings = asdict(config)
    where = device_key(dev)
    on_cpu = dev.type == "cpu"
    net = task_model(base, task.num_labels, task.regression, config.seed, task.word_level)
    frozen = frozen_parameters(net,
                               frozen_layers(config, n_transformer_layers(net)))
    with torch_threads(CPU_THREADS) if on_cpu else contextlib.nullcontext():
        with fork_rng(dev):
            torch.manual_seed(config.seed)
            start = time.perf_counter()
            losses: list[float] = []
            history = train(net, base.tokenizer, task, config, frozen=frozen,
                            progress=progress, device=dev,
                            on_step=lambda step, loss: losses.append(loss))
            seconds = time.perf_counter() - start
        kw = dict(max_length=config.max_length, batch_size=config.eval_batch_size)
        # the learning curve's point of the kept epoch was read from the kept weights, in
        # the training precision: the final validation scores (evaluation is
        # deterministic); the test scores are read in float32
        kept = kept_epoch(config, history)
        validation = {k.removeprefix("validation_"): v for k, v in history[kept - 1].items()
                      if k.startswith("validation_")}
        metrics = {"validation": validation or evaluate(net, base.tokenizer, task,
                                                        "validation", **kw),
                   "test": evaluate(net, base.tokenizer, task, "test", **kw)}
    record = {"base_model": base.info.to_dict(), "task": task.name, "task_meta": task.meta,
              "task_level": "word" if task.word_level else "sentence",
              "task_fingerprint": task.fingerprint(), "label_names": task.label_names,
              "config": settings, "frozen_parameters": sorted(frozen), "history": history,
              "kept_epoch": kept,
              "loss_curve": loop.loss_curve(losses),
              "metrics": metrics, "train_seconds": seconds,
              "train_examples": len(task.train), "device": where,
              "cpu_threads": CPU_THREADS if on_cpu else None,
              "library_version": __version__,
              "torch_version": torch.__version__}
    if cache:
        _save(path, net, base, record, frozen if store == "trainable" else None)
    return FineTuned(path, net, base.tokenizer, record)


def lookup(model: str, task: Task | str, config: FinetuneConfig | str = "cpu", *,
           cache_dir: str | os.PathLike | None = None, device: DeviceLike = None,
           store: str = "full",
           **load_options: Any) -> FineTuned | None:
    """The cached result of :func:`finetune` with the same arguments, or None when the cache
    does not hold it: nothing is trained. A page uses it to read the runs of a longer
    schedule (another profile) when they have been trained, at no cost when they have not."""
    config, task, base, dev = _arguments(model, task, config, device, store, cache_dir,
                                         load_options)
    found = _load_saved(_run_path(base, task, config, dev, store, cache_dir), base)
    return None if found is None else _placed(found, dev)


def _arguments(model: str, task: Task | str, config: FinetuneConfig | str, device: DeviceLike,
               store: str, cache_dir: str | os.PathLike | None, load_options: dict[str, Any]
               ) -> tuple[FinetuneConfig, Task, LoadedModel, torch.device]:
    """The checked settings, the task, the base model (loaded through the run's cache) and
    the device of a run."""
    config = check_config(preset(config) if isinstance(config, str) else config)
    checks.choice(store, "store", STORES)
    base = load(model, cache_dir=cache_dir, **load_options)  # its flags are checked first
    if isinstance(task, str):
        task = load_task(task)
    dev = resolve(device)
    # "auto" becomes the precision this machine trains in, which the key and record hold
    config = replace(config, precision=training_precision(config.precision, dev,
                                                          base.info.hidden_size))
    return config, task, base, dev


def _run_path(base: LoadedModel, task: Task, config: FinetuneConfig, dev, store: str,
              cache_dir) -> Path:
    """The cache folder of a run: every setting, the data, the code, the device and the base
    model's weights themselves in its key (a folder replaced by another checkpoint of the same
    file sizes and times is another model)."""
    key = make_key(kind="finetune", base=base.info.fingerprint,
                   weights=weights_digest(base.model), task=task.name,
                   code=code_digest(__name__),
                   task_data=task.fingerprint(), config=asdict(config),
                   cpu_threads=CPU_THREADS if dev.type == "cpu" else None,
                   **key_parts(dev), **({} if store == "full" else {"store": store}))
    return default_root(cache_dir) / "finetune" / key


#: what :func:`finetune` can keep of a run (``store``)
STORES = ("full", "trainable")
#: the weights file of a run that kept only its trained weights
TRAINABLE = TRAINABLE_WEIGHTS


def _with_base(path: Path, base: LoadedModel, record: dict[str, Any]):
    """The task model of a run saved with ``store="trainable"``: the base model's weights,
    then the saved ones over them; every weight not saved must be one the run froze."""
    from safetensors.torch import load_file
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(path, local_files_only=True)
    model = task_model(base, config.num_labels, config.problem_type == "regression", 0,
                       record.get("task_level") == "word")
    missing, unexpected = model.load_state_dict(load_file(str(path / TRAINABLE)), strict=False)
    not_frozen = sorted(set(missing) - set(record["frozen_parameters"]))
    if unexpected or not_frozen:
        raise ValueError(f"the saved weights do not fit the base model: unexpected "
                         f"{unexpected[:3]}, missing and not frozen {not_frozen[:3]}")
    return model.eval()


#: What a saved record must hold (a record of another shape is damaged and retrained).
RECORD_KEYS = {"config": dict, "metrics": dict, "history": list, "checksums": dict,
               "label_names": list, "task": str}


def _save(path: Path, model, base: LoadedModel, record: dict[str, Any],
          frozen: set[str] | None = None) -> None:
    """Write the model folder atomically (a temporary folder, then one rename): the whole
    model, or (``frozen`` given) every tensor but the frozen ones and the config."""

    def write(tmp: Path) -> None:
        if frozen is None:
            model.save_pretrained(tmp, safe_serialization=True)
        else:
            from safetensors.torch import save_file

            kept = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()
                    if k not in frozen}
            save_file(kept, str(tmp / TRAINABLE))
            model.config.save_pretrained(tmp)
        base.tokenizer.save_pretrained(tmp)
        full = {**record, "checksums": folder_checksums(tmp, "*.safetensors")}
        (tmp / "record.json").write_text(json.dumps(full, indent=1, default=str))

    publish_folder(path, write, lambda: _load_saved(path, base, quiet=True) is not None)


def _check_record(record: Any) -> dict[str, Any]:
    if not isinstance(record, dict):
        raise ValueError("record.json does not hold an object")
    for key, kind in RECORD_KEYS.items():
        if not isinstance(record.get(key), kind):
            raise ValueError(f"record.json: {key!r} is missing or not a {kind.__name__}")
    if not record["checksums"]:
        raise ValueError("record.json lists no weight files")
    return record


def _load_saved(path: Path, base: LoadedModel, quiet: bool = False) -> FineTuned | None:
    """The saved run at ``path`` (None when there is none; a damaged one is removed, to be
    trained again); ``base`` supplies the frozen weights of a run that kept only its
    trained ones."""
    if not path.exists():
        return None
    from transformers import (
        AutoModelForSequenceClassification,
        AutoModelForTokenClassification,
        AutoTokenizer,
    )

    try:
        record = _check_record(json.loads((path / "record.json").read_text()))
        kind = (AutoModelForTokenClassification if record.get("task_level") == "word"
                else AutoModelForSequenceClassification)
        if folder_checksums(path, list(record["checksums"])) != record["checksums"]:
            raise ValueError("checksum mismatch in the weights")
        if (path / TRAINABLE).is_file():
            model, tokenizer = _with_base(path, base, record), base.tokenizer
        else:
            with quiet_transformers():  # no load report or "Loading weights" bar per run
                model = kind.from_pretrained(path, attn_implementation="eager",
                                             local_files_only=True).eval()
                tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError) as error:
        if not quiet:
            warnings.warn(f"saved fine-tuned model {path} is damaged ({error}); it will be "
                          "trained again", RuntimeWarning, stacklevel=3)
            import shutil

            shutil.rmtree(path, ignore_errors=True)
        return None
    return FineTuned(path, model, tokenizer, record, from_cache=True)
