"""Pretrain small language models on the packaged text: the model zoo's training.

:func:`pretrain` trains a BERT-architecture model from scratch with the library's one loop
(:mod:`analysis_lib.training.loop`) on the packaged tweets and BBC sentences, with one of two
objectives on the same architecture:

``"clm"``
    causal language modelling: every token predicts the next one, attention reads left to
    right (``is_decoder=True``), as GPT-2;
``"mlm"``
    masked language modelling: a share ``mask_rate`` of the tokens is chosen, 80% of those
    replaced by ``[MASK]``, 10% by a random token, 10% left, and predicted from both sides
    (BERT; Devlin et al. 2019 masked 15%, a higher rate learns faster in a small budget).

Everything that changes the weights is in :class:`PretrainConfig` and the cache key; the same
configuration trains the same weights on any run of the same machine (seeded initialisation,
dropout and batch sampling; a fixed tokenizer with canonical ids). Every 50th sentence of each
source is held out; the held-out loss is reported against the unigram baseline (the loss of
predicting every token from its training frequency), and a model counts as having learned
when its held-out perplexity is at most 0.6 of the unigram one (any use of context beats the
unigram model; a masked model that has only begun to use its neighbours sits at 0.65-0.9, so
0.6 asks for a clear margin).

The result is a normal model folder (safetensors, config, tokenizer) with a ``record.json`` of
the settings, the loss curve, the held-out numbers, the time and the library and torch
versions; ``checkpoints`` adds the weights at earlier steps of the same run. Every run also
keeps its initial weights (``checkpoints/step-0``): the untrained model of the same seed,
architecture and tokenizer, the null of a comparison between models trained from different
seeds (what two seeds share before any training).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tqdm.auto import tqdm

from .. import __version__
from ..models.zoo_store import (
    CPU_THREADS,
    HELD_OUT_EVERY,
    LEARNED_RATIO,
    PretrainConfig,
    Pretrained,
    cached,
    check_config,
    key_of,
    read_saved,
)
from ..runtime.cache import claimed, default_root, folder_checksums, publish_folder
from ..runtime.device import DeviceLike, fork_rng, model_device, resolve
from ..runtime.device import key as device_key
from ..runtime.profile import profiled
from ..runtime.quiet import quiet_transformers
from ..runtime.threads import torch_threads, usable_cores
from . import loop

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase, PreTrainedTokenizerFast


def tokenizer(vocab_size: int = 8000,
              cache_dir: str | os.PathLike | None = None) -> PreTrainedTokenizerFast:
    """The zoo's shared tokenizer: the library's WordPiece of the BERT family, trained once
    per cache on the packaged text, the same in every process
    (:func:`~analysis_lib.models.random_init.train_tokenizer`)."""
    from ..models.random_init import train_tokenizer

    return train_tokenizer("bert", vocab_size, cache_dir)


def sentences(data: str) -> tuple[list[str], list[str]]:
    """(training, held-out) sentences of ``data``: every 50th sentence of each source held
    out, the rest for training, in file order."""
    from ..data.corpora import read_bbc, read_tweets

    sources = {"tweets": lambda: read_tweets()[0], "bbc": lambda: read_bbc("sentence")[0]}
    chosen = list(sources) if data == "both" else [data]
    train, held = [], []
    for name in chosen:
        texts = sources[name]()
        held += [t for k, t in enumerate(texts) if k % HELD_OUT_EVERY == 0]
        train += [t for k, t in enumerate(texts) if k % HELD_OUT_EVERY != 0]
    return train, held


def token_blocks(tok: PreTrainedTokenizerBase, texts: list[str], block: int) -> np.ndarray:
    """Every text between ``[CLS]`` and ``[SEP]``, concatenated and cut into rows of
    ``block`` token ids (the incomplete last row dropped)."""
    if hasattr(tok, "backend_tokenizer"):  # the fast tokenizer's own batch call, no offsets
        ids = (e.ids for e in tok.backend_tokenizer.encode_batch_fast(texts))
    else:
        ids = tok(texts, add_special_tokens=True)["input_ids"]
    stream = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64)
    n = len(stream) // block
    if n == 0:
        raise ValueError(f"{len(stream)} tokens make no block of {block}")
    return stream[: n * block].reshape(n, block)


@functools.lru_cache(maxsize=4)
def _data_blocks(vocab_size: int, root: str, data: str, block: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(training, held-out) token blocks of ``data``, kept (read-only) for the next model of
    the zoo trained in this process: the tokenizer is the same in every process, so they
    depend on nothing else."""
    tok = tokenizer(vocab_size, root)
    train, held = (token_blocks(tok, texts, block) for texts in sentences(data))
    for b in (train, held):
        b.flags.writeable = False
    return train, held


def mask_tokens(ids: torch.Tensor, rate: float, tok: PreTrainedTokenizerBase,
                generator: torch.Generator
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking: ``(inputs, labels)`` with labels -100 where nothing is predicted.
    Special tokens are never chosen; of the chosen, 80% become ``[MASK]``, 10% a random
    token, 10% stay."""
    special = torch.as_tensor(np.isin(ids.numpy(), tok.all_special_ids))
    chosen = (torch.rand(ids.shape, generator=generator) < rate) & ~special
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    inputs = ids.clone()
    draw = torch.rand(ids.shape, generator=generator)
    inputs[chosen & (draw < 0.8)] = tok.mask_token_id
    swap = chosen & (draw >= 0.8) & (draw < 0.9)
    inputs[swap] = torch.randint(len(tok), ids.shape, generator=generator)[swap]
    return inputs, labels


def _batch(blocks: np.ndarray, config: PretrainConfig, tok, generator) -> dict:
    ids = torch.tensor(blocks)  # a copy: the blocks are read-only
    if config.objective == "clm":
        return {"input_ids": ids, "labels": ids}
    inputs, labels = mask_tokens(ids, config.mask_rate, tok, generator)
    return {"input_ids": inputs, "labels": labels}


def _model(config: PretrainConfig, tok):
    from transformers import BertConfig, BertForMaskedLM, BertLMHeadModel

    bert = BertConfig(vocab_size=len(tok), hidden_size=config.hidden,
                      num_hidden_layers=config.layers, num_attention_heads=config.heads,
                      intermediate_size=4 * config.hidden,
                      max_position_embeddings=max(512, config.block),
                      pad_token_id=tok.pad_token_id, is_decoder=config.objective == "clm",
                      hidden_dropout_prob=config.dropout,
                      attention_probs_dropout_prob=config.dropout)
    cls = BertLMHeadModel if config.objective == "clm" else BertForMaskedLM
    return cls(bert)


class MaskedOnly(torch.nn.Module):
    """A masked LM (``BertForMaskedLM``) for training: the model's own loss (cross-entropy
    over the tokens that have a label, mean over them), with the output layer computed at
    those positions only. The full model computes the vocabulary's logits at every position
    and the loss reads a ``mask_rate`` share of them; here the others are never computed,
    which saves most of the output layer's work, the largest part of a step of a small
    model. The weights trained are the wrapped model's."""

    def __init__(self, model: Any):  # a transformers BertForMaskedLM
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> Any:
        hidden = self.model.bert(input_ids=input_ids).last_hidden_state
        keep = labels != -100
        scores = self.model.cls(hidden[keep])
        return SimpleNamespace(loss=torch.nn.functional.cross_entropy(scores.float(),
                                                                       labels[keep]))


def held_out_loss(model: torch.nn.Module, blocks: np.ndarray, config: PretrainConfig,
                  tok: PreTrainedTokenizerBase,
                  batch_size: int = 64) -> float:
    """Mean loss (nats) per predicted held-out token; the masks are drawn from a fixed seed,
    the same for every model. As in training (:class:`MaskedOnly`), the output layer is
    computed at the predicted positions only: a masked model predicts ``mask_rate`` of
    them, and the vocabulary's scores at the others would be computed to be thrown away."""
    generator = torch.Generator().manual_seed(12345)
    total, count = 0.0, 0
    dev = model_device(model)
    lm: Any = model.eval()  # a BertForMaskedLM or BertLMHeadModel: its encoder and head
    with torch.inference_mode():
        for start in range(0, len(blocks), batch_size):
            batch = _batch(blocks[start:start + batch_size], config, tok, generator)
            # no cache of keys and values: nothing is generated
            hidden = lm.bert(input_ids=batch["input_ids"].to(dev),
                             use_cache=False).last_hidden_state
            labels = batch["labels"].to(dev)
            if config.objective == "clm":  # each position predicts the next token
                hidden, labels = hidden[:, :-1], labels[:, 1:]
            keep = labels != -100
            loss = torch.nn.functional.cross_entropy(lm.cls(hidden[keep]).float(),
                                                     labels[keep], reduction="sum")
            total += float(loss)
            count += int(keep.sum())
    return total / max(count, 1)


def unigram_loss(train: np.ndarray, held: np.ndarray, vocab: int, config: PretrainConfig,
                 tok: PreTrainedTokenizerBase) -> float:
    """Held-out loss (nats per token) of predicting every token from its training frequency
    (add-one smoothing), over the tokens the objective predicts."""
    counts = np.bincount(train.ravel(), minlength=vocab).astype(np.float64) + 1.0
    logp = np.log(counts / counts.sum())
    if config.objective == "clm":
        targets = held[:, 1:].ravel()
    else:
        generator = torch.Generator().manual_seed(12345)
        labels = []
        for start in range(0, len(held), 64):
            labels.append(_batch(held[start:start + 64], config, tok, generator)["labels"])
        flat = torch.cat([x.ravel() for x in labels]).numpy()
        targets = flat[flat != -100]
    return float(-logp[targets].mean())


@profiled("pretrain", lambda config, **k: k.get("name") or "model")
def pretrain(config: PretrainConfig, *, cache_dir: str | os.PathLike | None = None,
             progress: bool = True,
             name: str = "zoo", device: DeviceLike = None) -> Pretrained:
    """Train ``config`` (or read it from the cache) on ``device`` (default: CUDA when
    available, else the CPU, with :data:`CPU_THREADS` threads): see the module docs. The
    initial weights, the batches and the masks are drawn on the CPU, so they are the same on
    every device."""
    check_config(config)
    dev = resolve(device)
    path = default_root(cache_dir) / "pretrain" / key_of(config, dev)
    saved = read_saved(path)
    if saved is not None:
        return saved
    with claimed(path):  # a model two processes ask for at once is trained once
        saved = read_saved(path)
        if saved is not None:
            return saved
        with torch_threads(CPU_THREADS) if dev.type == "cpu" else contextlib.nullcontext():
            return _train(config, cache_dir, progress, name, dev, path)


#: the environment variable that tells a worker of :func:`pretrain_many` its parent's process
#: id, so that it ends with its parent even if the parent is gone before the worker starts
WORKER_PARENT_ENV = "ANALYSIS_LIB_WORKER_PARENT"


@profiled("pretrain", lambda configs, **k: f"{len(configs)} models side by side")
def pretrain_many(configs: dict[str, PretrainConfig], *, cache_dir: str | os.PathLike | None = None,
                  progress: bool = True, device: DeviceLike = None, workers: int | None = None
                  ) -> dict[str, Pretrained]:
    """:func:`pretrain` every named config, the ones not in the cache side by side in
    ``workers`` worker processes when they train on the CPU; the weights are the same as
    trained one by one.

    The default is one worker per core this process may use (at most one per model), each
    on one thread: never more busy threads than cores, so the timings of a build are steady
    and another job on the machine is not starved. (Two workers per core finish an odd
    number of models sooner, 285 s against 317 s for seven models on 2 cores, at the price
    of timings that depend on the scheduler.)"""
    for config in configs.values():
        check_config(config)
    dev = resolve(device)
    root = str(default_root(cache_dir))
    todo = [n for n, c in configs.items() if cached(c, root, dev) is None]
    workers = min(len(todo), workers or usable_cores())
    if dev.type == "cpu" and workers > 1:
        for size in {c.vocab_size for c in configs.values()}:
            tokenizer(size, root)  # once, before the workers read it
        # each worker is a fresh interpreter that imports only the library (never the
        # caller's script or notebook) and trains the models it is sent into the cache, one
        # after another; it ends when this process does
        _run_workers({n: json.dumps({"name": n, "config": asdict(configs[n])}) for n in todo},
                     root, workers, progress)
    return {n: pretrain(c, cache_dir=root, progress=progress, name=n, device=dev)
            for n, c in configs.items()}


def _run_workers(specs: dict[str, str], root: str, workers: int, progress: bool) -> None:
    """Train each named model (its settings as one line of JSON) in ``workers`` worker
    processes, each sent the next model when it has finished one, so that the models are
    shared out as they finish. The first failure is an error that stops the others, and so
    is an interrupt. Each worker knows this process's id, so it ends when this process does
    (even killed)."""
    waiting = list(specs)[::-1]  # popped from the end: the models in their order
    lock = threading.Lock()
    started: list[subprocess.Popen] = []
    stopping = threading.Event()
    bar = tqdm(total=len(specs), desc="pretrain", unit="model", disable=not progress)

    def next_model() -> str | None:
        with lock:
            return waiting.pop() if waiting and not stopping.is_set() else None

    def serve() -> None:  # one worker: models in, their names back when trained
        with tempfile.TemporaryFile("w+", encoding="utf-8") as errors:
            process = subprocess.Popen(
                [sys.executable, "-m", "analysis_lib.training._pretrain_worker", root],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True,
                env={**os.environ, WORKER_PARENT_ENV: str(os.getpid())})
            started.append(process)
            sent, replies = process.stdin, process.stdout
            assert sent is not None and replies is not None
            try:
                while (name := next_model()) is not None:
                    with contextlib.suppress(BrokenPipeError):  # a worker that has failed
                        sent.write(specs[name] + "\n")
                        sent.flush()
                    if replies.readline().strip() != name:  # it ended without the model
                        code = process.wait()
                        errors.seek(0)
                        raise RuntimeError(f"pretraining {name!r} failed in its worker "
                                           f"process (exit {code}):\n{errors.read()[-3000:]}")
                    bar.update()
            finally:  # the end of its input ends the worker
                with contextlib.suppress(BrokenPipeError):
                    sent.close()
                process.wait()
                replies.close()

    with ThreadPoolExecutor(workers) as pool:
        runs = [pool.submit(serve) for _ in range(workers)]
        try:
            finished, _ = wait(runs, return_when=FIRST_EXCEPTION)  # all, unless one failed
            for future in finished:
                future.result()  # a worker's error is raised here
        finally:  # an error or an interrupt here stops the other workers too
            stopping.set()
            for process in started:
                if process.poll() is None:
                    process.terminate()
            bar.close()


def _train(config: PretrainConfig, cache_dir, progress: bool, name: str, dev, path: Path
           ) -> Pretrained:
    tok = tokenizer(config.vocab_size, cache_dir)
    train, held = _data_blocks(config.vocab_size, str(default_root(cache_dir)), config.data,
                               config.block)
    curve: list[list[float]] = []
    snapshots: dict[int, dict[str, torch.Tensor]] = {}

    with fork_rng(dev), quiet_transformers():
        torch.manual_seed(config.seed)
        model = _model(config, tok).to(dev)
        snapshots[0] = {k: v.detach().clone() for k, v in model.state_dict().items()}
        rng = np.random.default_rng(config.seed)
        generator = torch.Generator().manual_seed(config.seed)

        def epoch():
            for rows in np.array_split(rng.permutation(len(train)),
                                       max(1, len(train) // config.batch_size)):
                yield _batch(train[np.sort(rows[: config.batch_size])], config, tok,
                             generator)

        def on_step(step: int, loss: float) -> None:
            curve.append([step, loss])
            if step in config.checkpoints:
                snapshots[step] = {k: v.detach().clone() for k, v in
                                   model.state_dict().items()}

        start = time.perf_counter()
        trained = MaskedOnly(model) if config.objective == "mlm" else model
        loop.run(trained, epoch, total_steps=config.steps, learning_rate=config.learning_rate,
                 warmup_steps=config.warmup_steps, weight_decay=config.weight_decay,
                 desc=f"pretrain {name}", progress=progress, on_step=on_step, device=dev)
        seconds = time.perf_counter() - start
    evaluation = _evaluate(model, train, held, config, tok)
    checkpoint_eval = {str(step): _evaluate(_restored(config, tok, state), train, held,
                                            config, tok)
                       for step, state in snapshots.items() if step in config.checkpoints}
    record = {"name": name, "config": asdict(config), "curve": curve,
              "evaluation": evaluation, "checkpoint_evaluation": checkpoint_eval,
              "train_blocks": int(len(train)), "held_out_blocks": int(len(held)),
              "train_seconds": seconds, "device": device_key(dev),
              "library_version": __version__,
              "torch_version": torch.__version__}

    def write(tmp: Path) -> None:
        _save_folder(tmp, model, tok)
        for step, state in snapshots.items():
            _save_folder(tmp / "checkpoints" / f"step-{step}", _restored(config, tok, state),
                         tok)
        files = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*.safetensors"))
        full = {**record, "checksums": folder_checksums(tmp, files)}
        (tmp / "record.json").write_text(json.dumps(full, indent=1), encoding="utf-8")

    publish_folder(path, write, lambda: read_saved(path, quiet=True) is not None)
    return Pretrained(path, json.loads((path / "record.json").read_text(encoding="utf-8")))


def _restored(config: PretrainConfig, tok, state: dict[str, torch.Tensor]):
    """A model of ``config`` holding the weights ``state`` (built without touching the global
    random state)."""
    with torch.random.fork_rng(devices=[]):
        model = _model(config, tok)
    model.load_state_dict(state)
    return model.eval()


def _save_folder(folder: Path, model, tok) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)


def _evaluate(model, train, held, config, tok) -> dict[str, Any]:
    loss = held_out_loss(model, held, config, tok)
    base = unigram_loss(train, held, len(tok), config, tok)
    return {"held_out_loss": loss, "perplexity": float(np.exp(loss)),
            "unigram_loss": base, "unigram_perplexity": float(np.exp(base)),
            "ratio": float(np.exp(loss - base)),
            "learned": bool(np.exp(loss - base) <= LEARNED_RATIO)}


