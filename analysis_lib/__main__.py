"""Command line: ``python -m analysis_lib <command>``.

``book --profile NAME``
    Execute every notebook in ``notebooks/`` with papermill under the profile's parameters
    (``profiles/NAME.yml``) into ``_build/executed/``, after extracting every model of the
    profile on its corpora into the cache; print per-step run times.
``extract --model NAME --corpus NAME [--n N]``
    Extract one model on one corpus into the cache and print the array shapes.
``corpora`` / ``models``
    List the registered corpora / the offline model names.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_profile(name: str) -> dict:
    """The parameters of a named profile (``profiles/<name>.yml``)."""
    import yaml

    path = ROOT / "profiles" / f"{name}.yml"
    if not path.is_file():
        valid = sorted(p.stem for p in (ROOT / "profiles").glob("*.yml"))
        raise SystemExit(f"unknown profile {name!r}; valid: {', '.join(valid)}")
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _prefetch(profile: dict) -> list[tuple[str, float]]:
    from . import corpora, extract

    times = []
    for corpus_name in (profile["corpus"], profile.get("second_corpus")):
        if not corpus_name:
            continue
        corpus = corpora.load_corpus(corpus_name, n=profile["n_sentences"], seed=profile["seed"])
        for model in profile["models"]:
            options = profile.get("model_options", {}) if model.startswith("random:") else {}
            start = time.perf_counter()
            result = extract.extract(model, corpus, attention=True, **options)
            seconds = time.perf_counter() - start
            times.append((f"extract {model} on {corpus_name}", seconds))
            print(f"  {model:<20} {corpus_name:<10} layers={result.n_layers} "
                  f"words={result.words.shape[1]} {seconds:6.1f} s", flush=True)
    return times


def cmd_book(args: argparse.Namespace) -> int:
    profile = load_profile(args.profile)
    print(f"profile {args.profile}: {profile}")
    times = _prefetch(profile)
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    out = ROOT / "_build" / "executed"
    out.mkdir(parents=True, exist_ok=True)
    if not notebooks:
        print("no notebooks in notebooks/ yet; the profile's data is extracted and cached")
    for nb in notebooks:
        import papermill

        start = time.perf_counter()
        papermill.execute_notebook(str(nb), str(out / nb.name), parameters_file=None,
                                   parameters=profile, cwd=str(ROOT / "notebooks"),
                                   progress_bar=False)
        times.append((nb.name, time.perf_counter() - start))
    print("\nrun times:")
    for what, seconds in times:
        print(f"  {what:<50} {seconds:7.1f} s")
    return 0


def cmd_extract(args: argparse.Namespace) -> int:
    from . import corpora, extract

    corpus = corpora.load_corpus(args.corpus, n=args.n, seed=args.seed)
    result = extract.extract(args.model, corpus, attention=args.attention)
    print(f"{args.model} on {args.corpus} (n={len(corpus)}): words {result.words.shape}, "
          f"sentences {result.sentence_mean.shape}, truncated {result.n_truncated}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis_lib")
    sub = parser.add_subparsers(dest="command", required=True)
    book = sub.add_parser("book", help="run the notebooks under a profile")
    book.add_argument("--profile", default="default")
    book.set_defaults(func=cmd_book)
    ext = sub.add_parser("extract", help="extract one model on one corpus into the cache")
    ext.add_argument("--model", default="minilm")
    ext.add_argument("--corpus", default="tweets")
    ext.add_argument("--n", type=int, default=None)
    ext.add_argument("--seed", type=int, default=0)
    ext.add_argument("--attention", action="store_true")
    ext.set_defaults(func=cmd_extract)
    sub.add_parser("corpora", help="list the corpora").set_defaults(
        func=lambda a: print("\n".join(f"{k:<10} {v}" for k, v in
                                       __import__("analysis_lib.corpora").corpora
                                       .list_corpora().items())) or 0)
    sub.add_parser("models", help="list the offline model names").set_defaults(
        func=lambda a: print("\n".join(__import__("analysis_lib.models").models
                                       .OFFLINE_MODELS)) or 0)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
