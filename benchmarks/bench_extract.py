"""Benchmark: extracting every layer of MiniLM against a bare forward loop, in one run.

Prints words per second for

* ``extract.extract`` (tokenise, length-sorted batches, forward pass with all hidden states,
  last-subword pooling of words, first/mean sentence vectors), cache off;
* a bare loop of ``model(**batch, output_hidden_states=True)`` over the very same batches
  (tokenisation done beforehand, nothing kept);
* the same bare loop with every batch padded to the corpus's longest sentence, in corpus
  order (what one gets without length bucketing);

their ratios; the time of the weights' digest that keys every extraction's cache
(``models.weights_digest``) against a plain one (BLAKE2b over a copy of each tensor's
bytes); and the peak memory (max RSS) of the process.

    python benchmarks/bench_extract.py [--n 2000] [--batch-size 32] [--model minilm]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import torch

from analysis_lib import extract, models, similarity
from analysis_lib.data import corpora
from analysis_lib.extract import _batches, _encode
from analysis_lib.runtime.device import resolve


def bare_loop(model, encoded, batches, pad_id, pad_to=None, device=None):
    """model(**batch) over the batches; off the CPU, every hidden state is copied to host
    memory (what any use of them needs)."""
    device = device or torch.device("cpu")
    with torch.inference_mode():
        for batch in batches:
            width = pad_to or max(len(encoded[s].ids) for s in batch)
            ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for r, s in enumerate(batch):
                ids[r, : len(encoded[s].ids)] = torch.tensor(encoded[s].ids)
                mask[r, : len(encoded[s].ids)] = 1
            out = model(input_ids=ids.to(device), attention_mask=mask.to(device),
                        output_hidden_states=True)
            if device.type != "cpu":
                [h.cpu() for h in out.hidden_states]


def copied_blake2b(model) -> str:
    """The plain digest the library's is measured against: BLAKE2b over a bytes copy of
    each tensor, in the same order and with the same names, shapes and types."""
    import hashlib

    digest = hashlib.blake2b(digest_size=16)
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().contiguous().cpu()
        digest.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--repeats", type=int, default=2, help="best of this many runs")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    args = parser.parse_args()
    dev = resolve(args.device)
    torch.manual_seed(0)
    loaded = models.load(args.model)
    loaded.model.to(dev)
    corpus = corpora.load_corpus("tweets", n=args.n, seed=0)
    n_words = corpus.n_words
    encoded, _ = _encode(loaded.tokenizer, corpus, loaded.info.max_length)
    lengths = np.array([len(e.ids) for e in encoded])
    batches = _batches(lengths, args.batch_size, sort=True)
    unsorted = _batches(lengths, args.batch_size, sort=False)
    pad_id = loaded.tokenizer.pad_token_id
    print(f"{args.model}: {len(corpus)} tweets, {n_words} words, {lengths.sum()} tokens "
          f"(longest {lengths.max()}), batch size {args.batch_size}, "
          f"{torch.get_num_threads()} threads")

    def best(f):
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            f()
            times.append(time.perf_counter() - start)
        return min(times)

    bare_loop(loaded.model, encoded, batches[:2], pad_id, device=dev)  # warm-up
    t_lib = best(lambda: extract.extract(loaded, corpus, cache=False, progress=False,
                                         batch_size=args.batch_size, device=dev))
    t_bare = best(lambda: bare_loop(loaded.model, encoded, batches, pad_id, device=dev))
    t_padded = best(lambda: bare_loop(loaded.model, encoded, unsorted, pad_id,
                                      pad_to=int(lengths.max()), device=dev))
    print(f"\n{'':<44}{'seconds':>9}{'words/s':>10}")
    for label, t in (("library extract (all layers, pooled, no cache)", t_lib),
                     ("bare model(**batch), same sorted batches", t_bare),
                     ("bare loop padded to the longest sentence", t_padded)):
        print(f"{label:<44}{t:>9.2f}{n_words / t:>10.0f}")
    print(f"\nlibrary / bare loop speed: {t_bare / t_lib:.2f}x (goal >= 0.95 on the CPU, "
          ">= 0.9 on a GPU)")
    print(f"length bucketing vs padding to the longest: {t_padded / t_lib:.2f}x (goal >= 1.5)")
    size_mb = sum(t.numel() * t.element_size()
                  for t in loaded.model.state_dict().values()) / 1e6
    t_digest = best(lambda: models.weights_digest(loaded.model))
    t_plain = best(lambda: copied_blake2b(loaded.model))
    print(f"\nweights digest of {size_mb:.0f} MB: library (SHA-256 of the tensors' memory) "
          f"{t_digest:.3f} s, {size_mb / t_digest:.0f} MB/s; BLAKE2b of copies {t_plain:.3f} s, "
          f"{size_mb / t_plain:.0f} MB/s ({t_plain / t_digest:.2f}x)")
    if dev.type == "cuda":  # reduced precision: speed, and how far the numbers move
        full = extract.extract(loaded, corpus, cache=False, progress=False,
                               batch_size=args.batch_size, device=dev)
        for precision in ("bfloat16", "float16"):
            t = best(lambda p=precision: extract.extract(
                loaded, corpus, cache=False, progress=False, batch_size=args.batch_size,
                device=dev, precision=p))
            low = extract.extract(loaded, corpus, cache=False, progress=False,
                                  batch_size=args.batch_size, device=dev, precision=precision)
            top = full.n_layers - 1
            gap = np.abs(low.words - full.words).max() / np.abs(full.words).max()
            cka = similarity.linear_cka(low.layer(top), full.layer(top))
            print(f"{precision}: {t:.2f} s ({t_lib / t:.2f}x float32); largest difference "
                  f"{gap:.1e} of the largest value; linear CKA with float32, top layer "
                  f"{cka:.6f}")
    print(f"peak memory (max RSS): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}"
          " MB")


if __name__ == "__main__":
    main()
