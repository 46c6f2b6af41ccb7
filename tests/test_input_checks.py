"""Input checked where it enters: text files that must decode, paths that are not regular
files, model names with stray whitespace, measure options, and resampling designs that cannot
answer (a permutation null without freedom, resamples on which the measure is undefined)."""

from __future__ import annotations

import contextlib
import os
import warnings

import numpy as np
import pytest

from analysis_lib import similarity
from analysis_lib.data import corpora
from analysis_lib.errors import UndefinedMeasure
from analysis_lib.models.loading import check_name
from analysis_lib.runtime import checks

# --------------------------------------------------------------------------- text files


def test_a_latin1_file_is_refused_with_its_encoding_named_and_read_when_given(tmp_path):
    path = tmp_path / "latin.txt"
    path.write_bytes("café au lait\nsecond line\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"not valid utf-8.*line 1.*encoding='latin-1'"):
        corpora.from_file(path)
    corpus = corpora.from_file(path, encoding="latin-1")
    assert corpus.texts == ["café au lait", "second line"]
    assert not any("\ufffd" in t for t in corpus.texts)


def test_random_bytes_are_not_a_corpus(tmp_path):
    path = tmp_path / "noise.txt"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(ValueError, match="not valid utf-8.*does not look like text"):
        corpora.from_file(path)


def test_a_utf16_file_is_named_as_such_and_read_with_its_encoding(tmp_path):
    path = tmp_path / "wide.txt"
    path.write_bytes("first sentence\nsecond one\n".encode("utf-16"))
    with pytest.raises(ValueError, match="UTF-16.*encoding='utf-16'"):
        corpora.from_file(path)
    assert corpora.from_file(path, encoding="utf-16").texts == ["first sentence", "second one"]


def test_only_newlines_end_a_sentence(tmp_path):
    """U+2028, NEL and form feed (which str.splitlines() breaks at) stay inside their line."""
    path = tmp_path / "seps.txt"
    path.write_text("one\u2028two\x85three\x0cfour\r\nfive\n\n", encoding="utf-8")
    assert corpora.from_file(path).texts == ["one two three four", "five"]


def test_a_byte_order_mark_is_dropped_and_an_unknown_encoding_named(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes("\ufeffhello there\n".encode())
    assert corpora.from_file(path).texts == ["hello there"]
    with pytest.raises(ValueError, match="unknown encoding 'nope'"):
        corpora.from_file(path, encoding="nope")
    (tmp_path / "blank.txt").write_text("\n  \n")
    with pytest.raises(ValueError, match="has no text"):
        corpora.from_file(tmp_path / "blank.txt")


# --------------------------------------------------------------------------- paths


def test_a_fifo_a_device_and_a_link_loop_are_named_for_what_they_are(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="named pipe"):
        corpora.from_file(fifo)
    with pytest.raises(ValueError, match="is a device"):
        corpora.from_file("/dev/null")
    a, b = tmp_path / "a", tmp_path / "b"
    a.symlink_to(b)
    b.symlink_to(a)
    with pytest.raises(OSError, match="loops back"):
        corpora.from_file(a)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "gone")
    with pytest.raises(FileNotFoundError, match="symbolic link to .*gone.*does not exist"):
        corpora.from_file(dangling)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        checks.existing_file(tmp_path / "missing", "file", "fix")


# --------------------------------------------------------------------------- model names


@pytest.mark.parametrize("name", ["minilm\n", " minilm", "minilm ", "bert-base-cased\t"])
def test_a_model_name_with_stray_whitespace_is_refused_with_the_clean_name(name):
    with pytest.raises(ValueError, match=f"did you mean {name.strip()!r}"):
        check_name(name)


def test_a_hub_id_must_match_whole():
    assert check_name("bert-base-cased") == "hub"
    assert check_name("google/multiberts-seed_0") == "hub"
    with pytest.raises(ValueError):
        check_name("org/model\x00")


# --------------------------------------------------------------------------- measure options

RNG = np.random.default_rng(0)
X = RNG.standard_normal((60, 5))
Y = X @ RNG.standard_normal((5, 4)) + 0.5 * RNG.standard_normal((60, 4))


@pytest.mark.parametrize("call", [
    lambda: similarity.neuronsim(X, Y, top_k=True),
    lambda: similarity.svcca(X, Y, top_k=True),
    lambda: similarity.pairwise([X, Y], measure="mixedsim", top_k=True),
])
def test_top_k_true_is_not_one(call):
    with pytest.raises(TypeError, match="top_k.*integer.*True"):
        call()


@pytest.mark.parametrize("reg", [float("nan"), float("inf"), -1.0])
def test_cca_reg_is_checked_before_any_work(reg):
    with pytest.raises(ValueError, match="reg must"):
        similarity.cca(X, Y, reg=reg)
    with pytest.raises(ValueError, match="reg must"):
        similarity.pairwise([X, Y], measure="cca", reg=reg)


# --------------------------------------------------------------------------- resampling


def test_a_permutation_null_without_freedom_is_refused():
    """Groups of all different sizes can only map onto themselves: the null would be the
    observed value and p = 1 whatever the data (the ungrouped test finds the relation)."""
    groups = np.repeat(np.arange(10), [1, 2, 3, 4, 5, 6, 7, 8, 9, 15])
    with pytest.raises(ValueError, match="all have different sizes.*groups=None"):
        similarity.permutation_test(X, Y, groups=groups, n_perm=50)
    assert similarity.permutation_test(X, Y, n_perm=50).p_value < 0.05


def test_a_permutation_null_with_little_freedom_warns():
    groups = np.repeat(np.arange(10), [2, 2, 3, 4, 5, 6, 7, 8, 9, 14])  # one pair can swap
    with pytest.warns(RuntimeWarning, match="only 2 distinct shuffles"):
        similarity.permutation_test(X, Y, groups=groups, n_perm=20)


def test_equal_groups_shuffle_freely():
    groups = np.repeat(np.arange(12), 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = similarity.permutation_test(X, Y, groups=groups, n_perm=50)
    assert result.p_value < 0.05


def test_a_rare_undefined_resample_does_not_abort_the_bootstrap():
    """Six of ten rows are copies of one stimulus: a resample draws only those with
    probability 0.6^10 (about 1 in 170), and then the layer has no variance. Those resamples
    are left out and counted (with a warning) instead of aborting the other ones."""
    rng = np.random.default_rng(3)
    C = rng.standard_normal((10, 2))
    C[:6] = C[0]
    D = rng.standard_normal((10, 2))
    with pytest.warns(RuntimeWarning, match="left out of the interval"):
        result = similarity.bootstrap(C, D, n_boot=300, seed=1)
    assert 0 < result.undefined <= 15
    assert np.isnan(result.samples).sum() == result.undefined
    defined = result.samples[~np.isnan(result.samples)]
    half = 1.959964 * np.std(defined, ddof=1)  # the default interval reads the defined ones
    assert (result.low, result.high) == pytest.approx((result.estimate - half,
                                                       result.estimate + half))
    with pytest.warns(RuntimeWarning, match="left out of the interval"):
        percentile = similarity.bootstrap(C, D, n_boot=300, seed=1, interval="percentile")
    assert percentile.low == pytest.approx(np.quantile(defined, 0.025))
    assert percentile.high == pytest.approx(np.quantile(defined, 0.975))


def test_a_bootstrap_mostly_undefined_is_refused_with_the_reason():
    A = np.zeros((8, 3))
    A[0] = 1.0
    with pytest.raises(UndefinedMeasure, match="undefined on .* resamples"):
        similarity.bootstrap(A, RNG.standard_normal((8, 3)), n_boot=200)


def test_one_layer_given_as_a_list_of_rows_is_named():
    rows_x = X.tolist()
    rows_y = Y.tolist()
    for call in (similarity.bootstrap, similarity.permutation_test):
        with pytest.raises(ValueError, match=r"X is a list of 60 rows.*np.asarray\(X\)"):
            call(rows_x, rows_y, n_boot=5) if call is similarity.bootstrap else \
                call(rows_x, rows_y, n_perm=5)
    matrix = similarity.bootstrap([X, X], [Y, Y], n_boot=5)
    assert matrix.low.shape == (2, 2)


# --------------------------------------------------------------------------- profiles


@pytest.mark.parametrize("notebook, values, message", [
    ("finetuning", {"finetune": {"seeds": [0, 0, 0]}}, r"holds \[0\] more than once"),
    ("attention", {"duplicate_threshold": float("nan")}, "must be finite"),
    ("finetuning", {"finetune": {"epochs": float("nan")}}, "must be finite"),
    ("truncation", {"finetune": {"epochs": float("inf")}}, "must be finite"),
    ("seeds", {"model_options": {"layers": 1000000}}, r"layers must lie in \[1, 128\]"),
    ("seeds", {"model_options": {"layers": 2, "hidden": 33, "heads": 2}},
     "hidden=33 must be divisible by heads=2"),
    ("representation", {"model_options": {"layers": 128, "hidden": 16384, "heads": 16}},
     "parameters, more than"),
    ("seeds", {"table_layers": [-1]}, r"items \[-1\] are below 0"),
    ("measures_primer", {"n_stimuli": 10 ** 9}, "at most"),
    ("measures_primer", {"book_rows": 10 ** 9}, "at most"),
    ("truncation", {"skip_examples": 10 ** 9}, "at most"),
    ("seeds", {"synthetic_sizes": [3]}, "below 10"),
    ("representation", {"models": ["minilm", "minilm"]}, "more than once"),
    ("representation", {"seed": -1}, "at least|below|needs"),
])
def test_profile_values_are_checked_for_finiteness_bounds_repeats_and_consistency(
        notebook, values, message):
    from analysis_lib.book import params

    with pytest.raises(params.ParameterError, match=message):
        params.validate(values, params.declared(notebook), partial=True)


def test_every_shipped_profile_passes_the_checks():
    from pathlib import Path

    from analysis_lib.book import builder, params

    for profile in ("smoke", "default", "larger", "paper", "paper-shape"):
        values = builder.load_profile(profile)
        for notebook in sorted(Path(builder.ROOT, "notebooks").glob("*.ipynb")):
            spec = params.declared(notebook)
            params.validate({k: v for k, v in values.items() if k in spec}, spec,
                            partial=True)


def test_an_empty_profile_is_refused(tmp_path):
    from analysis_lib.book import builder

    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "empty.yml").write_text("# nothing set\n")
    with pytest.raises(ValueError, match="profile empty.yml is empty"):
        builder.load_profile("empty", tmp_path)


# --------------------------------------------------------------------------- specs and cache


GRID = {"name": "checks", "corpus": "tweets", "n_sentences": 8, "max_words": 40,
        "models": ["random:bert", "random:gpt2"], "measures": ["linear_cka"],
        "model_options": {"layers": 2, "hidden": 32, "heads": 2, "vocab_size": 2000}}


@pytest.mark.parametrize("options, message", [
    ({"trust_remote_code": True}, "trust_remote_code cannot be set from a file"),
    ({"word_poolng": "mean"}, "unknown option 'word_poolng' .did you mean 'word_pooling'"),
    ({"batch_size": 0}, "batch_size must be at least 1"),
    ({"attention": "yes"}, "attention must be True or False"),
    ({"cache_dir": "/elsewhere"}, "unknown option 'cache_dir'"),
    ({"precision": "float8"}, "precision"),
])
def test_a_sweeps_extraction_options_are_checked_before_any_unit_runs(options, message):
    from analysis_lib import sweep

    with pytest.raises(ValueError, match=message):
        sweep.load_spec({**GRID, "extract_options": options})


def test_valid_extraction_options_pass():
    from analysis_lib import sweep

    spec = sweep.load_spec({**GRID, "extract_options": {"word_pooling": "mean",
                                                        "batch_size": 4}})
    assert spec.extract_options == {"word_pooling": "mean", "batch_size": 4}


@pytest.mark.parametrize("name", ["../../escaped", "a/b", ".hidden", "/abs", "x y"])
def test_a_sweep_name_stays_one_folder_under_sweeps(name):
    from analysis_lib import sweep

    with pytest.raises(ValueError, match="becomes the folder sweeps/<name>"):
        sweep.load_spec({**GRID, "name": name})


def test_a_manifest_cannot_name_a_file_outside_its_entry(tmp_path):
    import json

    from analysis_lib.runtime.cache import ArrayCache, sha256_file

    cache = ArrayCache("probe", tmp_path)
    entry = cache.save("k", {"a": np.arange(3)}, {"m": 1})
    outside = tmp_path / "secret.npy"
    np.save(outside, np.arange(5))
    manifest = json.loads((entry / "manifest.json").read_text())
    manifest["arrays"]["../../secret"] = {"dtype": "int64", "shape": [5],
                                          "sha256": sha256_file(outside)}
    (entry / "manifest.json").write_text(json.dumps(manifest))
    with pytest.warns(RuntimeWarning, match="outside its entry"):
        assert cache.load("k") is None  # damaged: removed, to be recomputed
    assert not entry.exists() and outside.exists()


def test_a_relative_cache_variable_is_one_folder_for_every_process(tmp_path, monkeypatch):
    """The book's kernels work in notebooks/: a relative ANALYSIS_LIB_CACHE is pinned to the
    folder the build started in, so every process writes one cache."""
    import subprocess
    import sys

    from analysis_lib.runtime import cache

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(cache.ENV_VAR, "rel-cache")
    assert cache.default_root() == tmp_path / "rel-cache"
    cache.pin_root()
    assert os.environ[cache.ENV_VAR] == str(tmp_path / "rel-cache")
    (tmp_path / "sub").mkdir()
    seen = subprocess.run([sys.executable, "-c", "from analysis_lib.runtime import cache; "
                           "print(cache.default_root())"], cwd=tmp_path / "sub",
                          capture_output=True, text=True, check=True).stdout.strip()
    assert seen == str(tmp_path / "rel-cache")


# --------------------------------------------------------------------------- model folders


def test_a_model_folder_without_its_tokenizer_is_refused(tmp_path):
    """Weights saved with save_pretrained alone used to load with a 5-entry default tokenizer
    that made every word [UNK]."""
    from analysis_lib import models
    from tests.conftest import TINY

    loaded = models.load("random:bert", **TINY)
    folder = tmp_path / "weights-only"
    loaded.model.save_pretrained(folder)
    with pytest.raises(ValueError, match="has no tokenizer files.*tokenizer.save_pretrained"):
        models.load(str(folder))
    loaded.tokenizer.save_pretrained(folder)
    again = models.load(str(folder))
    assert len(again.tokenizer) == len(loaded.tokenizer)
    assert "[UNK]" not in again.tokenizer.tokenize("the film was good")


OFFLINE_LOAD = """
import socket, sys
attempts = []
def refuse(address, *args, **kwargs):
    attempts.append(address)
    raise OSError("no network in this test")
socket.create_connection = refuse
socket.socket.connect = lambda self, address: refuse(address)
from analysis_lib import models
from analysis_lib.errors import OfflineError
try:
    models.load("nobody/not-cached")
except OfflineError as error:
    assert "offline switch is on" in str(error), error
loaded = models.load("org/tiny")
print(loaded.info.source, len(loaded.tokenizer), attempts)
"""


def test_the_offline_switch_opens_no_connection(tmp_path):
    """With ANALYSIS_LIB_OFFLINE=1 a hub model is read from the Hugging Face cache, and one
    that is not there is refused, without a single connection attempt."""
    import subprocess
    import sys

    from analysis_lib import models
    from tests.conftest import TINY

    commit = "0" * 40
    repo = tmp_path / "hub" / "models--org--tiny"
    snapshot = repo / "snapshots" / commit
    loaded = models.load("random:bert", **TINY)
    loaded.model.save_pretrained(snapshot)
    loaded.tokenizer.save_pretrained(snapshot)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    env = {**os.environ, "ANALYSIS_LIB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub"),
           "HF_HOME": str(tmp_path / "hf-home")}
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("TRANSFORMERS_OFFLINE", None)
    ran = subprocess.run([sys.executable, "-c", OFFLINE_LOAD], env=env, capture_output=True,
                         text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:]
    source, size, attempts = ran.stdout.split(maxsplit=2)
    assert source == "hub" and int(size) == len(loaded.tokenizer)
    assert attempts.strip() == "[]"


def test_cache_dir_reaches_model_loading_and_nothing_goes_to_the_home_cache(
        tmp_path, monkeypatch):
    """extract(cache_dir=...), finetune(cache_dir=...) and truncated copies keep everything
    a run writes (the random models' tokenizers among it) under that folder."""
    from analysis_lib import extract
    from analysis_lib.runtime import cache
    from analysis_lib.training import finetune, surgery
    from tests.conftest import TINY
    from tests.test_finetune import FAST, keyword_task

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.delenv(cache.ENV_VAR, raising=False)
    mine = tmp_path / "mine"
    options = {**TINY, "vocab_size": 1234}  # a tokenizer no other test trained
    # as in a fresh process: the tokenizer's training text is parsed from the packaged
    # corpora here, whatever this worker's earlier tests parsed
    corpora._parsed.cache_clear()
    corpus = corpora.from_sentences(["the film was good", "this car is bad"])
    extract.extract("random:bert", corpus, cache_dir=str(mine), progress=False, **options)
    finetune.finetune("random:gpt2", keyword_task(), FAST, cache_dir=mine, progress=False,
                      **options)
    surgery.truncated_copy("random:roberta", 1, cache_dir=mine, **options)
    assert not list(home.rglob("*")), list(home.rglob("*"))[:5]
    assert len(list(mine.rglob("*tokenizer*"))) >= 3


# --------------------------------------------------------------------------- left behind


def test_temporary_folders_of_killed_writers_are_swept_and_live_ones_kept(tmp_path):
    from analysis_lib.runtime import cache

    store = cache.ArrayCache("x", tmp_path)
    store.save("first", {"a": np.arange(3)}, {})
    dead = _dead_pid()
    folder = tmp_path / "x"
    killed = folder / f".tmp-entry-{cache._HOST}-{dead}-0123abcd"
    killed.mkdir()
    (killed / "half.npy").write_bytes(b"\x00" * 1000)
    live = folder / f".tmp-other-{cache._HOST}-{os.getpid()}-89abcdef"
    live.mkdir()
    elsewhere = folder / f".tmp-far-otherhost-{dead}-0badcafe"
    elsewhere.mkdir()
    old = folder / ".results.csv.otherhost.12.deadbeef.tmp"
    old.write_text("half")
    os.utime(old, (1, 1))  # written long ago
    store.save("second", {"a": np.arange(4)}, {})
    assert not killed.exists() and not old.exists()
    assert live.exists() and elsewhere.exists()  # a writer that may still be at work
    assert store.load("first") is not None and store.load("second") is not None


def test_a_failed_atomic_write_leaves_no_temporary_file(tmp_path):
    from analysis_lib.runtime import cache

    def full(path):
        path.write_text("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        cache.atomic_write(tmp_path / "table.csv", full)
    assert list(tmp_path.iterdir()) == []


def _dead_pid() -> int:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


WORKERS_OF_A_KILLED_PARENT = """
import sys
from analysis_lib.models.zoo_store import PretrainConfig
from analysis_lib.training import pretrain
configs = {f"m{s}": PretrainConfig(layers=1, hidden=32, heads=2, data="tweets", steps=100000,
                                   batch_size=4, block=16, vocab_size=2000, seed=s)
           for s in range(2)}
pretrain.pretrain_many(configs, cache_dir=sys.argv[1], progress=False, workers=2)
"""


@pytest.mark.slow
def test_pretraining_workers_end_with_their_parent(tmp_path):
    """SIGTERM to a process that trains models side by side (``zoo --train``) ends its
    workers too, instead of leaving them training."""
    import signal
    import subprocess
    import sys
    import time

    psutil = pytest.importorskip("psutil")
    workers: list = []
    parent = subprocess.Popen([sys.executable, "-c", WORKERS_OF_A_KILLED_PARENT,
                               str(tmp_path)])
    try:
        deadline = time.time() + 120
        while time.time() < deadline and len(workers) < 2:
            workers = [p for p in psutil.Process(parent.pid).children()
                       if "_pretrain_worker" in " ".join(p.cmdline())]
            time.sleep(0.2)
        assert len(workers) == 2, "the workers did not start"
        time.sleep(1.0)
        parent.send_signal(signal.SIGTERM)
        parent.wait(timeout=30)
        gone, alive = psutil.wait_procs(workers, timeout=20)
        assert not alive, f"{len(alive)} workers kept running after their parent ended"
    finally:  # nothing of this test keeps running, whatever it found
        for process in [*psutil.Process().children(recursive=True), *workers]:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()


def test_the_size_check_knows_the_loaders_defaults():
    """A partial model_options ({"hidden": 100}) is checked with the sizes the loader fills
    in (12 heads do not divide 100)."""
    import inspect

    from analysis_lib.models.loading import load
    from analysis_lib.models.random_init import DEFAULT_SIZES, size_problems

    defaults = {k: p.default for k, p in inspect.signature(load).parameters.items()
                if k in DEFAULT_SIZES}
    assert defaults == DEFAULT_SIZES
    assert any("divisible by heads=12" in p for p in size_problems({"hidden": 100}))
    assert size_problems({"hidden": 96}) == []
