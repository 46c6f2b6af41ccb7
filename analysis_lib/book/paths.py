"""Where the book's sources are: the repository root (its ``notebooks/``, ``book/``,
``profiles/``, ``_toc.yml``) and the library's own folder."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = Path(__file__).resolve().parents[1]
