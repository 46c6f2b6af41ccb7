"""Benchmark: fine-tuning MiniLM with the library against a bare training loop, in one run.

Fine-tunes ``minilm`` on ``tweets-sentiment`` (2,000 training examples) for one epoch with the
``cpu`` preset, then runs a bare loop (forward, backward, AdamW step) over the very same
batches from the same starting weights (on the CPU both at ``finetune.CPU_THREADS`` torch
threads). Prints examples per second of both and their ratio, peak memory, and the library
model's test accuracy and macro-F1 beside the majority baseline.

    python benchmarks/bench_finetune.py [--n-train 2000] [--epochs 1]
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import tempfile
import time
from dataclasses import replace

import numpy as np
import torch

from analysis_lib import models
from analysis_lib.data import tasks
from analysis_lib.models.batching import pad_batch
from analysis_lib.runtime.device import resolve
from analysis_lib.runtime.threads import torch_threads
from analysis_lib.training import finetune, loop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-train", type=int, default=2000)
    parser.add_argument("--n-test", type=int, default=1000)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    args = parser.parse_args()
    dev = resolve(args.device)
    task = tasks.load_task("tweets-sentiment", n_train=args.n_train, n_val=200,
                           n_test=args.n_test, seed=0)
    config = replace(finetune.PRESETS["cpu"], epochs=args.epochs)
    print(f"{args.model} on {task.name}: {len(task.train)} train / {len(task.test)} test, "
          f"{config}")

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = finetune.finetune(args.model, task, config, cache_dir=tmp, progress=False,
                                   device=dev)
        t_total = time.perf_counter() - start
    t_lib = result.record["train_seconds"]
    n_seen = result.record["history"][-1]["steps"] * config.batch_size

    # the bare loop: same starting weights and head, same batches, nothing else
    base = models.load(args.model)
    model = finetune.task_model(base, task.num_labels, False, config.seed).to(dev)
    ids = finetune.encode_split(base.tokenizer, task.train, config.max_length)
    lengths = np.array([len(x) for x in ids])
    batches = loop.bucketed_batches(lengths, config.batch_size, config.bucket_factor,
                                    np.random.default_rng(config.seed))
    labels = torch.tensor(task.train.labels, device=dev)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
    pad = base.tokenizer.pad_token_id
    model.train()
    # on the CPU the library trains at finetune.CPU_THREADS threads; the bare loop too
    with torch_threads(finetune.CPU_THREADS) if dev.type == "cpu" else contextlib.nullcontext():
        start = time.perf_counter()
        seen = 0
        for rows in batches:
            input_ids, mask = pad_batch(ids, rows, pad)
            loss = model(input_ids=input_ids.to(dev), attention_mask=mask.to(dev),
                         labels=labels[rows]).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            seen += len(rows)
        loss.item()  # wait for the device
        t_bare = time.perf_counter() - start

    test = result.metrics["test"]
    print(f"\n{'':<36}{'seconds':>9}{'examples/s':>12}")
    print(f"{'library fine-tuning (train only)':<36}{t_lib:>9.1f}{n_seen / t_lib:>12.1f}")
    print(f"{'bare loop, same batches':<36}{t_bare:>9.1f}{seen / t_bare:>12.1f}")
    print(f"\nlibrary / bare speed: {(n_seen / t_lib) / (seen / t_bare):.2f}x (goal >= 0.9)")
    print(f"library total with evaluation and saving: {t_total:.1f} s")
    print(f"test accuracy {test['accuracy']:.3f}, macro-F1 {test['macro_f1']:.3f}, "
          f"majority baseline {test['majority_baseline']:.3f} (n={test['n']})")
    print(f"peak memory (max RSS): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}"
          " MB")


if __name__ == "__main__":
    main()
