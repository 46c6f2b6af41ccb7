"""The book's build keys its work by content: an edited input reruns its chapter, the file
checked is the file read, a profile file of one's own builds apart, and two builds of one
profile never write at once."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import nbformat
import pytest

from analysis_lib import book
from analysis_lib.book import builder

ROOT = Path(__file__).resolve().parent.parent


def _reader_notebook() -> nbformat.NotebookNode:
    """A one-cell chapter that prints the corpus it was given."""
    nb = nbformat.v4.new_notebook()
    parameters = nbformat.v4.new_code_cell(
        'corpus: str = "tweets"  # the corpus the sentences come from [corpus]')
    parameters.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# Reader"), parameters,
                nbformat.v4.new_code_cell(
                    "from analysis_lib.data import corpora\n"
                    "text = corpora.load_corpus(corpus)\n"
                    "print('read:', ' | '.join(text.texts), '| from', corpus)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    return nb


@pytest.fixture
def tiny_book(tmp_path, monkeypatch):
    """A book of one chapter that reads a corpus; Jupyter Book itself is left out (what is
    tested here happens before it), so a build takes one kernel's start."""
    root = tmp_path / "book-root"
    (root / "notebooks").mkdir(parents=True)
    shutil.copy2(ROOT / "_config.yml", root / "_config.yml")
    shutil.copytree(ROOT / "book", root / "book")
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n"
                                   "  - file: notebooks/reader\n")
    nbformat.write(_reader_notebook(), str(root / "notebooks" / "reader.ipynb"))
    (root / "profiles").mkdir()
    (root / "profiles" / "smoke.yml").write_text("corpus: tweets\n")

    def no_sphinx(src: Path) -> Path:
        index = src / "_build" / "html" / "index.html"
        index.parent.mkdir(parents=True, exist_ok=True)
        index.write_text("built")
        return index

    monkeypatch.setattr(builder, "jupyter_book", no_sphinx)
    return root


def _printed(executed: Path) -> str:
    nb = nbformat.read(str(executed), as_version=4)
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.get("outputs", []))


def _reused(said: list[str]) -> bool:
    """Whether the build said it reused the chapter's executed copy."""
    return any(line.split() == ["reader", "reused"] for line in said)


def _profile(folder: Path, corpus: str, name: str = "mine.yml") -> Path:
    path = folder / name
    path.write_text(f"corpus: {corpus}\n")
    return path


def test_an_edited_corpus_file_reruns_its_chapter(tiny_book, tmp_path):
    text = tmp_path / "sentences.txt"
    text.write_text("the first text\nof two lines\n")
    profile = str(_profile(tmp_path, str(text)))
    label = builder.profile_label(profile)
    executed = tiny_book / "_build" / "executed" / label / "reader.ipynb"
    said: list[str] = []
    book.build(profile, root=tiny_book, echo=said.append, cell_timeout=120)
    assert "read: the first text | of two lines" in _printed(executed)
    book.build(profile, root=tiny_book, echo=said.append, cell_timeout=120)
    assert _reused(said)  # unchanged: nothing reruns
    text.write_text("an edited text\n")
    said.clear()
    book.build(profile, root=tiny_book, echo=said.append, cell_timeout=120)
    assert not _reused(said)
    assert "read: an edited text" in _printed(executed)


def test_a_relative_path_is_read_where_it_was_checked(tiny_book, tmp_path, monkeypatch):
    """A relative corpus path is resolved once, from the folder the build starts in, and
    that absolute path is what the chapter (which runs in notebooks/) reads; a path that
    exists only from the notebooks' folder is refused by its absolute name."""
    work = tmp_path / "elsewhere"
    (work / "data").mkdir(parents=True)
    (work / "data" / "mine.txt").write_text("read from the working folder\n")
    (tiny_book / "notebooks" / "data").mkdir()
    (tiny_book / "notebooks" / "data" / "mine.txt").write_text("the notebooks' own file\n")
    (tiny_book / "notebooks" / "data" / "only-here.txt").write_text("never read\n")
    monkeypatch.chdir(work)
    profile = str(_profile(work, "data/mine.txt"))
    book.build(profile, root=tiny_book, echo=lambda m: None, cell_timeout=120)
    executed = tiny_book / "_build" / "executed" / builder.profile_label(profile)
    printed = _printed(executed / "reader.ipynb")
    assert "read from the working folder" in printed and "own file" not in printed
    assert str(work / "data" / "mine.txt") in printed
    bad = str(_profile(work, "data/only-here.txt", "other.yml"))
    with pytest.raises(book.params.ParameterError,
                       match=str(work / "data" / "only-here.txt")):
        book.build(bad, root=tiny_book, echo=lambda m: None, cell_timeout=120)


def test_a_profile_file_named_like_a_book_profile_builds_apart(tiny_book, tmp_path,
                                                                monkeypatch):
    """``--profile elsewhere/smoke.yml`` never touches the book's own smoke build, and its
    pages name the file; the same file names the same build from any working folder."""
    ours = tiny_book / "_build" / "executed" / "smoke"
    ours.mkdir(parents=True)
    (ours / "reader.ipynb").write_text("the book's own smoke build")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    profile = _profile(elsewhere, "bbc-news", "smoke.yml")
    index = book.build(str(profile), root=tiny_book, echo=lambda m: None, cell_timeout=120)
    assert (ours / "reader.ipynb").read_text() == "the book's own smoke build"
    assert sorted(p.name for p in ours.iterdir()) == ["reader.ipynb"]
    label = builder.profile_label(str(profile))
    assert label not in {"smoke", "default", "larger", "paper", "paper-shape"}
    assert label.startswith("smoke-file-") and index.parent.parent.parent.name == f"book-{label}"
    executed = tiny_book / "_build" / "executed" / label / "reader.ipynb"
    assert f"profile: {profile}" in executed.read_text()
    findings_page = (tiny_book / "_build" / f"book-{label}" / "book" / "findings.md")
    assert str(profile) in findings_page.read_text()
    monkeypatch.chdir(tmp_path)
    assert builder.profile_label(os.path.join("elsewhere", "smoke.yml")) == label
    assert builder.profile_label("smoke") == "smoke"


def test_two_builds_at_once_never_write_together(tiny_book, tmp_path, monkeypatch):
    """Two builds of one profile started together: the second waits for the first (nothing
    is written by both) and then reuses its work."""
    profile = str(_profile(tmp_path, "bbc-news"))
    said: dict[int, list[str]] = {0: [], 1: []}
    errors: list[BaseException] = []
    running = threading.Event()
    waiting = threading.Event()
    real_execute = builder.execute

    def execute(*args, **kwargs):
        # the first build runs its chapter only once the second has found the folder held,
        # so the overlap does not depend on how fast either thread is
        waiting.wait(60)
        return real_execute(*args, **kwargs)

    monkeypatch.setattr(builder, "execute", execute)

    def run(k: int) -> None:
        def echo(line: str) -> None:
            said[k].append(line)
            if line.startswith("[1/1]"):
                running.set()  # this build holds the folder and runs its chapter
            if "another build of this profile is running" in line:
                waiting.set()
        try:
            book.build(profile, root=tiny_book, echo=echo, cell_timeout=120)
        except BaseException as error:  # reported below
            errors.append(error)

    first = threading.Thread(target=run, args=(0,))
    first.start()
    assert running.wait(60)
    second = threading.Thread(target=run, args=(1,))
    second.start()
    first.join(120)
    second.join(120)
    assert not errors
    assert any("another build of this profile is running" in line for line in said[1])
    assert not _reused(said[0]) and _reused(said[1])


def test_the_key_covers_a_model_folders_content(tmp_path):
    declared = {"models": book.params.Parameter("models", "list", [], rules={"model": True}),
                "corpus": book.params.Parameter("corpus", "str", "", rules={"corpus": True})}
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights one")
    values = builder.resolve_paths({"models": [str(folder), "minilm", "org/hub-model"],
                                    "corpus": "tweets"}, declared, tmp_path)
    assert values["models"] == [str(folder), "minilm", "org/hub-model"]
    first = builder.input_digests(values, declared)
    assert list(first) == [str(folder)]
    (folder / "model.safetensors").write_bytes(b"weights two")
    assert builder.input_digests(values, declared) != first


def test_staging_again_rewrites_only_what_changed(tmp_path):
    """The staged book keeps every file that would get the same bytes, with its time, so
    Sphinx reads again only what changed; a changed page or notebook is rewritten and one
    no longer in the book is dropped."""
    root = tmp_path / "root"
    root.mkdir()
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy2(ROOT / name, root / name)
    shutil.copytree(ROOT / "book", root / "book")
    (root / "book" / "gone.md").write_text("# soon gone\n")
    notebook = tmp_path / "a.ipynb"
    notebook.write_text("{}")
    runs = [builder.Executed("a", notebook, 0.0, False)]
    src = builder.stage("t", runs, root, {"intro.md": "front"})

    def staged() -> dict[str, int]:
        return {p.relative_to(src).as_posix(): p.stat().st_mtime_ns for p in src.rglob("*")
                if p.is_file() and "_static" not in p.parts}

    old = 1_000_000_000
    for name in staged():
        os.utime(src / name, ns=(old, old))
    builder.stage("t", runs, root, {"intro.md": "front"})
    assert set(staged().values()) == {old}  # nothing new: nothing written
    assert (src / "book" / "intro.md").read_text() == "front"
    (root / "book" / "gone.md").unlink()
    notebook.write_text('{"cells": []}')
    builder.stage("t", runs, root, {"intro.md": "front, again"})
    now = staged()
    assert "book/gone.md" not in now
    assert {n for n, t in now.items() if t != old} == {"book/intro.md", "notebooks/a.ipynb"}
    assert (src / "book" / "intro.md").read_text() == "front, again"
    assert (src / "notebooks" / "a.ipynb").read_text() == '{"cells": []}'


def test_a_build_prints_nothing_of_the_kernels_own_log(tmp_path, capfd):
    """The kernel's start-up warning and its shutdown interrupt stay out of the build's
    output (``builder.KERNEL_ARGUMENTS``); what a cell prints stays in the page."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import sys\nprint('to the page', file=sys.stderr)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    path = tmp_path / "page.ipynb"
    nbformat.write(nb, str(path))
    capfd.readouterr()
    done = builder.execute(path, {}, tmp_path / "out")
    err = capfd.readouterr().err
    assert "IPKernelApp" not in err and "Kernel is running" not in err, err
    page = nbformat.read(str(done.path), as_version=4)
    assert "to the page" in "".join(o.get("text", "") for o in page.cells[-1].outputs)
