import multiprocessing as mp
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from analysis_lib import extract
from analysis_lib.data import corpora
from analysis_lib.runtime.cache import ArrayCache, default_root, make_key


def _count_forwards(model):
    calls = []
    handle = model.register_forward_pre_hook(lambda *args: calls.append(1))
    return calls, handle


def test_second_call_reads_from_disk(tiny_models, tricky_corpus, tmp_path):
    loaded = tiny_models["bert"]
    calls, handle = _count_forwards(loaded.model)
    try:
        first = extract.extract(loaded, tricky_corpus, attention=True, cache_dir=tmp_path,
                                progress=False)
        n = len(calls)
        assert n > 0
        second = extract.extract(loaded, tricky_corpus, attention=True, cache_dir=tmp_path,
                                 progress=False)
        assert len(calls) == n  # no forward pass
        np.testing.assert_array_equal(first.words, second.words)
        for a, b in zip(first.attention, second.attention):
            np.testing.assert_array_equal(a, b)
        extract.extract(loaded, tricky_corpus, attention=True, word_pooling="mean",
                        cache_dir=tmp_path, progress=False)
        assert len(calls) > n  # a changed option misses
    finally:
        handle.remove()


def _damage(entry, how):
    file = entry / "words.npy"
    data = file.read_bytes()
    if how == "truncate":
        file.write_bytes(data[: len(data) // 2])
    elif how == "flip":
        file.write_bytes(data[:-9] + bytes([data[-9] ^ 0xFF]) + data[-8:])
    elif how == "manifest":
        (entry / "manifest.json").write_text("{not json")
    else:
        file.unlink()


@pytest.mark.parametrize("how", ["truncate", "flip", "manifest", "missing"])
def test_damaged_entry_is_recomputed(tiny_models, tricky_corpus, tmp_path, how):
    loaded = tiny_models["gpt2"]
    good = extract.extract(loaded, tricky_corpus, cache_dir=tmp_path, progress=False)
    [entry] = [p for p in (tmp_path / "extract").iterdir() if not p.name.startswith(".")]
    _damage(entry, how)
    calls, handle = _count_forwards(loaded.model)
    try:
        with pytest.warns(RuntimeWarning, match="damaged"):
            again = extract.extract(loaded, tricky_corpus, cache_dir=tmp_path, progress=False)
    finally:
        handle.remove()
    assert calls
    np.testing.assert_array_equal(good.words, again.words)
    assert ArrayCache("extract", tmp_path).load(entry.name) is not None


def _writer(root, key, value, barrier):
    cache = ArrayCache("race", root)
    barrier.wait()
    for _ in range(5):
        cache.save(key, {"x": np.full((200, 200), value, dtype=np.float32)}, {"v": value})


def test_two_processes_writing_one_key_leave_a_valid_entry(tmp_path):
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), "k", 1.0, barrier)),
             ctx.Process(target=_writer, args=(str(tmp_path), "k", 1.0, barrier))]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    arrays, meta = ArrayCache("race", tmp_path).load("k")
    assert arrays["x"].shape == (200, 200) and meta == {"v": 1.0}
    assert not [p for p in (tmp_path / "race").iterdir() if p.name.startswith(".tmp")]


def _asker(root, log, barrier):
    """Ask for one entry whose computation takes a while, noting each computation."""
    import time

    def compute():
        with open(log, "a") as out:
            out.write(f"{os.getpid()}\n")
        time.sleep(1.0)
        return {"x": np.arange(4.0)}, {"by": os.getpid()}

    barrier.wait()
    arrays, meta = ArrayCache("asked", root).get_or_compute("k", compute)
    assert arrays["x"].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_two_processes_asking_for_one_entry_compute_it_once(tmp_path):
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    log = tmp_path / "computed.txt"
    procs = [ctx.Process(target=_asker, args=(str(tmp_path), str(log), barrier))
             for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert len(log.read_text().split()) == 1  # the second waited and read the first's
    arrays, meta = ArrayCache("asked", tmp_path).load("k")
    assert meta["by"] == int(log.read_text())


def test_two_paths_to_one_entry_take_one_lock(tmp_path):
    """Two caches of their own whose folder of one kind of entry is a link to one shared
    folder (as the test workers share their tokenizers): an entry both ask for at once is
    still computed once."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    (tmp_path / "shared").mkdir()
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "asked").symlink_to(tmp_path / "shared", target_is_directory=True)
    log = tmp_path / "computed.txt"
    procs = [ctx.Process(target=_asker, args=(str(tmp_path / name), str(log), barrier))
             for name in ("one", "two")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert len(log.read_text().split()) == 1


def test_a_tokenizer_trained_while_waiting_for_its_lock_is_read_not_trained_again(
        tmp_path, monkeypatch):
    """Two processes that need one random model's tokenizer: the second waits for the
    first's lock (:func:`claimed`), then reads the file the first wrote."""
    import contextlib

    from analysis_lib.models import random_init

    trained = random_init.train_tokenizer("bert", 500, tmp_path / "first")
    name = next((tmp_path / "first" / "tokenizers").glob("bert-*.json")).name
    held = []

    @contextlib.contextmanager
    def another_process_finishes(final):
        held.append(final)
        final.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp_path / "first" / "tokenizers" / name, final)
        yield

    monkeypatch.setattr(random_init, "claimed", another_process_finishes)
    monkeypatch.setattr(random_init, "_untrained", lambda *a: pytest.fail("trained again"))
    again = random_init.train_tokenizer("bert", 500, tmp_path / "second")
    assert held == [tmp_path / "second" / "tokenizers" / name]
    assert again.get_vocab() == trained.get_vocab()


def test_cache_location_argument_env_and_default(monkeypatch, tmp_path):
    assert default_root(tmp_path) == tmp_path
    monkeypatch.setenv("ANALYSIS_LIB_CACHE", str(tmp_path / "env"))
    assert default_root() == tmp_path / "env"
    monkeypatch.delenv("ANALYSIS_LIB_CACHE")
    assert "analysis_lib" in str(default_root())


def test_keys_cover_their_parts():
    assert make_key(a=1, b=[1, 2]) == make_key(b=[1, 2], a=1)
    assert make_key(a=1) != make_key(a=2)
    with pytest.raises(TypeError, match="JSON"):
        make_key(a=object())


def test_cache_refuses_object_arrays_and_bad_names(tmp_path):
    cache = ArrayCache("x", tmp_path)
    with pytest.raises(TypeError, match="object"):
        cache.save("k", {"a": np.array([{}, []], dtype=object)}, {})
    with pytest.raises(ValueError, match="letters, digits"):
        cache.path("../escape")
    assert not os.listdir(tmp_path / "x")


def test_changed_corpus_misses(tiny_models, tmp_path):
    loaded = tiny_models["bert"]
    a = corpora.from_sentences(["one two"])
    b = corpora.from_sentences(["one three"])
    extract.extract(loaded, a, cache_dir=tmp_path, progress=False)
    extract.extract(loaded, b, cache_dir=tmp_path, progress=False)
    assert len([p for p in (tmp_path / "extract").iterdir()]) == 2


def _one_entry(folder):
    [entry] = [p for p in folder.iterdir() if not p.name.startswith(".")]
    return entry


@pytest.mark.parametrize("damage", ["drop_array", "meta_null", "meta_empty", "arrays_list"])
def test_a_manifest_of_the_wrong_shape_is_recomputed(tiny_models, tmp_path, damage):
    import json

    corpus = corpora.from_sentences(["a manifest of the wrong shape", "heals"])
    first = extract.extract(tiny_models["bert"], corpus, cache_dir=tmp_path, progress=False)
    entry = _one_entry(tmp_path / "extract")
    manifest = json.loads((entry / "manifest.json").read_text())
    if damage == "drop_array":
        del manifest["arrays"]["sentence_mean"]
    elif damage == "meta_null":
        manifest["meta"] = None
    elif damage == "meta_empty":
        manifest["meta"] = {}
    else:
        manifest["arrays"] = []
    (entry / "manifest.json").write_text(json.dumps(manifest))
    with pytest.warns(RuntimeWarning, match="damaged"):
        again = extract.extract(tiny_models["bert"], corpus, cache_dir=tmp_path,
                                progress=False)
    np.testing.assert_array_equal(again.sentence_mean, first.sentence_mean)
    # healed: the next read is a clean hit
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        extract.extract(tiny_models["bert"], corpus, cache_dir=tmp_path, progress=False)


def test_an_unwritable_cache_location_is_found_before_the_work(tiny_models, tmp_path,
                                                                monkeypatch):
    corpus = corpora.from_sentences(["checked before", "any work"])
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    ran = []
    monkeypatch.setattr(extract, "_run", lambda *a, **k: ran.append(1))
    with pytest.raises(OSError, match="is a file, not a folder; choose a folder .* set the "
                                      "ANALYSIS_LIB_CACHE"):
        extract.extract(tiny_models["bert"], corpus, cache_dir=blocker, progress=False)
    assert not ran


@pytest.mark.parametrize("blocked", ["file", "read-only"])
def test_every_cache_writer_names_an_unwritable_location_and_the_fix(tmp_path, monkeypatch,
                                                                    blocked):
    """A cache path that is a file, or a folder that refuses writes: the tokenizer of a
    random model, a published folder and an atomic file all say where and what to do,
    never a bare OSError."""
    from analysis_lib import models
    from analysis_lib.runtime import cache as cache_module

    monkeypatch.setattr(cache_module, "_WRITABLE", set())
    if blocked == "file":
        root = tmp_path / "a-file"
        root.write_text("not a folder")
        match = "is a file, not a folder; choose a folder"
    else:
        root = tmp_path / "read-only"
        root.mkdir()
        real = Path.write_bytes

        def refuse(self, data):
            if str(self).startswith(str(root)):
                raise PermissionError(13, "Permission denied", str(self))
            return real(self, data)

        monkeypatch.setattr(Path, "write_bytes", refuse)
        match = "cannot write to .*Permission denied.*ANALYSIS_LIB_CACHE"
    with pytest.raises(OSError, match=match):
        models.load("random:bert", layers=1, hidden=16, heads=2, vocab_size=500,
                    cache_dir=root)
    with pytest.raises(OSError, match=match):
        ArrayCache("x", root).save("k", {"x": np.arange(3)}, {})
    with pytest.raises(OSError, match=match):
        cache_module.atomic_write_text(root / "sub" / "f.txt", "x")


def test_weights_changed_in_memory_are_not_served_from_the_cache(tmp_path):
    import torch

    from analysis_lib import models

    loaded = models.load("random:bert", layers=2, hidden=32, heads=2, vocab_size=2000)
    corpus = corpora.from_sentences(["weights changed", "in memory"])
    before = extract.extract(loaded, corpus, cache_dir=tmp_path, progress=False)
    with torch.no_grad():
        loaded.model.encoder.layer[1].output.dense.weight.mul_(2.0)
    after = extract.extract(loaded, corpus, cache_dir=tmp_path, progress=False)
    assert not np.allclose(before.words[2], after.words[2])
    np.testing.assert_array_equal(before.words[1], after.words[1])


@pytest.mark.parametrize("failure", [OSError("Not enough free space to write 96 bytes after "
                                             "offset 128"),
                                     OSError("61824 requested and 3040 written"),
                                     OSError(28, "No space left on device"),
                                     RuntimeError("Error while serializing: IoError(Os { code: "
                                                  "28, kind: StorageFull })")])
def test_a_full_disk_names_the_cache_and_the_fix_and_leaves_nothing(tmp_path, monkeypatch,
                                                                    failure):
    cache = ArrayCache("x", tmp_path)
    key = "full"
    cache.save("earlier", {"x": np.arange(3)}, {})

    def no_room(*args, **kwargs):
        raise failure

    monkeypatch.setattr(np, "save", no_room)
    with pytest.raises(OSError, match="ran out of space.*ANALYSIS_LIB_CACHE") as raised:
        cache.save(key, {"x": np.arange(3)}, {})
    assert raised.value.errno == 28 and raised.value.__cause__ is failure
    assert cache.load(key) is None
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".tmp-")]
    monkeypatch.undo()
    assert cache.load("earlier") is not None  # what was there stays


def test_other_write_errors_pass_through_unchanged(tmp_path, monkeypatch):
    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(np, "save", denied)
    with pytest.raises(PermissionError, match="Permission denied"):
        ArrayCache("x", tmp_path).save("denied", {"x": np.arange(3)}, {})


def test_a_file_where_an_entry_belongs_is_replaced_not_fatal(tmp_path):
    """A stray file at an entry's path: the work is computed once, published in its place,
    and served from the cache after."""
    cache = ArrayCache("x", tmp_path)
    cache.path("k").parent.mkdir(parents=True, exist_ok=True)
    cache.path("k").write_text("not an entry")
    calls = []

    def compute():
        calls.append(1)
        return {"a": np.arange(3.0)}, {"m": 1}

    with pytest.warns(RuntimeWarning, match="is damaged .* it will be recomputed"):
        arrays, _ = cache.get_or_compute("k", compute)
    again, _ = cache.get_or_compute("k", compute)
    assert len(calls) == 1 and cache.path("k").is_dir()
    np.testing.assert_array_equal(again["a"], np.arange(3.0))


def test_float16_storage_refuses_values_beyond_its_range():
    """Activations past 65,504 would be stored (and cached) as inf: refused, naming the layer
    and its largest magnitude."""
    import torch

    from analysis_lib.extract import _check_half_range

    fine = {"words": torch.full((3, 4, 2), 6e4)}
    _check_half_range(fine, "m")
    big = {"words": torch.zeros((3, 4, 2)), "first": torch.zeros((3, 2, 2))}
    big["first"][2, 1, 0] = -7.5e4
    with pytest.raises(ValueError, match=r"layer 2 of m reaches 75,000.*storage='float32'"):
        _check_half_range(big, "m")
