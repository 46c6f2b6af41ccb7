"""Command line: ``python -m analysis_lib <command>``.

``book --profile NAME [--force]``
    Execute every notebook of the book with papermill under the profile's parameters
    (``profiles/NAME.yml``), then build the HTML book strictly; print per-notebook run times
    and the path of the built ``index.html`` (see :mod:`analysis_lib.book`).
``extract --model NAME --corpus NAME [--n N]``
    Extract one model on one corpus into the cache and print the array shapes.
``corpora`` / ``models``
    List the registered corpora / the offline model names.
"""

from __future__ import annotations

import argparse
import sys


def cmd_book(args: argparse.Namespace) -> int:
    from .book import BuildError, build

    print(f"building the book with the {args.profile!r} profile")
    try:
        build(args.profile, force=args.force)
    except (BuildError, ValueError) as error:
        print(f"\nerror: {error}", file=sys.stderr)
        return 1
    return 0


def cmd_extract(args: argparse.Namespace) -> int:
    from . import extract
    from .data import corpora

    corpus = corpora.load_corpus(args.corpus, n=args.n, seed=args.seed)
    result = extract.extract(args.model, corpus, attention=args.attention)
    print(f"{args.model} on {args.corpus} (n={len(corpus)}): words {result.words.shape}, "
          f"sentences {result.sentence_mean.shape}, truncated {result.n_truncated}")
    return 0


def cmd_corpora(args: argparse.Namespace) -> int:
    from .data.corpora import list_corpora

    for name, description in list_corpora().items():
        print(f"{name:<10} {description}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from .models import OFFLINE_MODELS

    print("\n".join(OFFLINE_MODELS))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis_lib")
    sub = parser.add_subparsers(dest="command", required=True)
    book = sub.add_parser("book", help="run the notebooks under a profile and build the book")
    book.add_argument("--profile", default="default")
    book.add_argument("--force", action="store_true", help="re-run unchanged notebooks too")
    book.set_defaults(func=cmd_book)
    ext = sub.add_parser("extract", help="extract one model on one corpus into the cache")
    ext.add_argument("--model", default="minilm")
    ext.add_argument("--corpus", default="tweets")
    ext.add_argument("--n", type=int, default=None)
    ext.add_argument("--seed", type=int, default=0)
    ext.add_argument("--attention", action="store_true")
    ext.set_defaults(func=cmd_extract)
    sub.add_parser("corpora", help="list the corpora").set_defaults(func=cmd_corpora)
    sub.add_parser("models", help="list the offline model names").set_defaults(func=cmd_models)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
