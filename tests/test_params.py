"""Notebook parameters declared once, checked before a notebook runs; YAML read as plain
values only."""

import pytest

from analysis_lib import book
from analysis_lib.book import params

CELL = '''models: list = ["minilm"]  # model names [model; min: 1]
n: int = 5  # how many [min: 2; max: 10]
rate: float = 0.5  # a share [min: 0.0; max: 1.0]
name: str = "a#b"  # a name with a '#' inside
kinds: list = ["x"]  # kinds [choices: ["x", "y"]; items: str]
'''


def test_parse_cell_reads_types_defaults_help_and_rules():
    declared = params.parse_cell(CELL)
    assert list(declared) == ["models", "n", "rate", "name", "kinds"]
    assert declared["n"].type == "int" and declared["n"].default == 5
    assert declared["n"].rules == {"min": 2, "max": 10} and declared["n"].help == "how many"
    assert declared["models"].rules == {"model": True, "min": 1}
    assert declared["name"].default == "a#b" and declared["name"].rules == {}
    assert declared["kinds"].rules == {"choices": ["x", "y"], "items": str}
    with pytest.raises(ValueError, match="unknown rule 'maxi'"):
        params.parse_cell("n: int = 1  # n [maxi: 3]")


def test_validate_lists_every_problem_with_its_fix():
    declared = params.parse_cell(CELL)
    good = {"models": ["minilm", "random:bert"], "n": 3, "rate": 1, "name": "x",
            "kinds": ["y"]}
    params.validate(good, declared)
    bad = {"models": ["random:bart"], "n": True, "rate": 2.0, "name": "x", "kinds": ["z", 1]}
    with pytest.raises(params.ParameterError) as caught:
        params.validate(bad, declared)
    text = str(caught.value)
    assert "unknown model family 'bart'" in text and "n=True: must be int" in text
    assert "rate=2.0: at most 1.0" in text and "['z', 1] not allowed" in text
    assert "items [1] must be str" in text
    with pytest.raises(params.ParameterError, match="n: missing"):
        params.validate({k: v for k, v in good.items() if k != "n"}, declared)
    params.validate({"n": 3}, declared, partial=True)


@pytest.mark.parametrize("notebook", ["measures_primer", "representation", "attention",
                                      "finetuning"])
def test_every_notebook_declares_rules_its_defaults_satisfy(notebook):
    declared = params.declared(notebook)
    assert declared and all(p.help for p in declared.values())
    params.validate({k: p.default for k, p in declared.items()}, declared)
    for profile in ("smoke", "default", "paper"):
        values = book.load_profile(profile)
        params.validate({k: v for k, v in values.items() if k in declared}, declared,
                        partial=True)


@pytest.mark.parametrize("text, where", [
    ("a: !!python/tuple [1, 2]\n", "'a'"),
    ("models: !!omap [{a: 1}]\n", "'models'"),
    ("x: {y: !!pairs [[1, 2]]}\n", "'y'"),
    ("d: 2026-11-22\n", "'d'"),
    ("s: !!set {a: null}\n", "'s'"),
    ("l: [1, !custom 2]\n", "'l'[1]"),
])
def test_yaml_with_any_tag_is_refused_naming_the_key(text, where):
    with pytest.raises(ValueError, match="YAML tag") as caught:
        params.read_yaml(text, "profile x.yml")
    assert where in str(caught.value) and "profile x.yml" in str(caught.value)


def test_plain_yaml_reads_plain_values():
    assert params.read_yaml("a: [1, 2.5, 'x', null, true]\nb: {c: d}\n") == {
        "a": [1, 2.5, "x", None, True], "b": {"c": "d"}}


def test_a_tagged_profile_stops_the_build_before_any_notebook_runs(tmp_path, monkeypatch):
    import shutil

    for name in ("_toc.yml", "_config.yml"):
        shutil.copy(book.ROOT / name, tmp_path / name)
    shutil.copytree(book.ROOT / "notebooks", tmp_path / "notebooks")
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "evil.yml").write_text(
        "seed: !!python/object/apply:os.system ['touch pwned']\n")
    ran = []
    monkeypatch.setattr(book.builder, "execute", lambda *a, **k: ran.append(a))
    with pytest.raises(ValueError, match="'seed' has the YAML tag"):
        book.build("evil", root=tmp_path, echo=lambda m: None)
    assert not ran and not (tmp_path / "pwned").exists()


def test_a_bad_profile_value_stops_the_build_before_any_notebook_runs(tmp_path, monkeypatch):
    import shutil

    for name in ("_toc.yml", "_config.yml"):
        shutil.copy(book.ROOT / name, tmp_path / name)
    shutil.copytree(book.ROOT / "notebooks", tmp_path / "notebooks")
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "bad.yml").write_text("n_neurons: 2\nmodels: ['random:bart']\n")
    ran = []
    monkeypatch.setattr(book.builder, "execute", lambda *a, **k: ran.append(a))
    with pytest.raises(params.ParameterError, match="n_neurons=2: needs at least 4"):
        book.build("bad", root=tmp_path, echo=lambda m: None)
    assert not ran


def test_every_study_with_models_accepts_packaged_and_zoo_names():
    from analysis_lib.book.params import ParameterError, check
    from analysis_lib.models.zoo import BASE

    names = ["mpnet", "smollm2", "zoo:base", f"zoo:base@{BASE.checkpoints[0]}", "zoo:seed-1"]
    for notebook, key in (("representation", "models"), ("attention", "models"),
                          ("seeds", "finetune")):
        values = dict(check_defaults(notebook))
        values[key] = {"models": names} if key == "finetune" else names
        check(values, notebook)  # no error
        values[key] = {"models": ["zoo:nope"]} if key == "finetune" else ["zoo:nope"]
        with pytest.raises(ParameterError, match="no zoo model 'nope'"):
            check(values, notebook)


def check_defaults(notebook):
    from analysis_lib.book.params import declared

    return {p.name: p.default for p in declared(notebook).values()}


def test_a_misspelt_profile_key_is_refused_with_the_closest_name():
    from analysis_lib.book.builder import check_profile_keys, load_profile, toc_notebooks

    notebooks = toc_notebooks()
    check_profile_keys(load_profile("default"), notebooks, "default")
    with pytest.raises(params.ParameterError, match=r"'n_sentencess' \(did you mean "
                                                    r"'n_sentences'\?\)"):
        check_profile_keys({"n_sentencess": 10, "seed": 0}, notebooks, "mine")


@pytest.mark.parametrize("text, match", [
    ("a: 1\nb: 2\na: 3\n", "'a' appears twice"),
    ("top:\n  x: [1]\n  x: [2]\n", "'x' appears twice"),
])
def test_yaml_refuses_duplicate_keys(text, match):
    with pytest.raises(ValueError, match=match):
        params.read_yaml(text)


def test_yaml_alias_bomb_is_refused_at_once():
    """Nine levels of ten aliases expand to 10^9 values from about 500 bytes: refused by
    counting (each node visited once), not by expanding (which would not finish)."""
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for k in range(1, 10):
        lines.append(f"a{k}: &a{k} [" + ", ".join([f"*a{k - 1}"] * 10) + "]")
    with pytest.raises(ValueError, match="expands to"):
        params.read_yaml("\n".join(lines))
    assert params.read_yaml("base: &b {x: 1}\nother: *b\n") == {"base": {"x": 1},
                                                              "other": {"x": 1}}


@pytest.mark.parametrize("text, match", [
    ("a: " + "[" * 3000 + "]" * 3000, "nests lists and mappings more than"),
    ("a:\n" + "".join("  " * k + f"k{k}:\n" for k in range(1, 200)) + "  " * 200 + "x: 1",
     "nests lists and mappings more than"),
    ("? [a, b]\n: 1\n", "keys must be plain names"),
    ("? {a: 1}\n: 1\n", "keys must be plain names"),
    # an alias of one long string, used 10,000 times: few values, 100 MB of text
    ("s: &s " + "x" * 10_000 + "\nl: [" + ", ".join(["*s"] * 10_000) + "]",
     "characters through its aliases"),
    ("a: " + "x" * 2_000_000, "characters long"),
    ("a: " + "9" * 5000, "a value cannot be read .* a number of ordinary size"),
])
def test_hostile_yaml_is_refused_with_a_short_message(text, match):
    """Depth, keys that are collections and aliases that expand to many bytes: a ValueError
    that names the limit, never a RecursionError, a traceback or a message of megabytes."""
    with pytest.raises(ValueError, match=match) as caught:
        params.read_yaml(text, "spec x.yml")
    assert len(str(caught.value)) < 600


def test_a_hostile_sweep_spec_is_an_error_line_not_a_traceback(tmp_path, capsys):
    from analysis_lib.__main__ import main

    spec = tmp_path / "deep.yml"
    spec.write_text("name: x\nmodels: " + "[" * 3000 + "]" * 3000)
    assert main(["sweep", str(spec)]) != 0
    err = capsys.readouterr().err
    assert "nests lists and mappings" in err and "Traceback" not in err and len(err) < 800


def test_every_parameter_with_names_or_ranges_is_checked_before_the_build():
    from analysis_lib.book import params

    spec = params.declared(book.ROOT / "notebooks" / "domains.ipynb")
    values = {k: v.default for k, v in spec.items()}
    values.update(finetune={"tasks": ["nosuch-task"], "seeds": [-1, 0], "epochs": "long",
                            "n_train": 10**9, "preset": "fast", "batch": 8},
                  other_domains={"tweets-sentiment": "nosuch", "bad-task": "tweets"},
                  model_options={"layers": -1, "bogus": 3})
    with pytest.raises(params.ParameterError) as error:
        params.validate(values, spec)
    text = str(error.value)
    for expected in ("unknown task ['nosuch-task']", "finetune.seeds: items [-1] are below 0",
                     "finetune.epochs='long': must be int or float",
                     "finetune.n_train=1000000000: at most 500000",
                     "finetune.preset: ['fast'] not allowed",
                     "finetune: unknown settings ['batch']",
                     "unknown corpus ['nosuch']", "unknown task ['bad-task'] among the keys",
                     "unknown keys ['bogus']", "model_options: items [-1] are below 1"):
        assert expected in text, expected
    spec = params.declared(book.ROOT / "notebooks" / "truncation.ipynb")
    values = {k: v.default for k, v in spec.items()}
    values["truncate_layers"] = [0, 99]
    with pytest.raises(params.ParameterError, match=r"\[0\] are below 1"):
        params.validate(values, spec)
    with pytest.raises(ValueError, match="unknown rule"):
        params.parse_cell("x: int = 1  # a number [smallest: 2]")


@pytest.mark.parametrize("notebook, name", [("finetuning", "freeze_ks"),
                                            ("truncation", "truncate_layers")])
def test_layer_counts_must_fit_the_model_they_apply_to(notebook, name):
    """Known answer: MiniLM has 6 transformer layers, a random model as many as its options
    say; a count above that is refused before the build, with the model and its depth."""
    from analysis_lib.book import params

    spec = params.declared(book.ROOT / "notebooks" / f"{notebook}.ipynb")
    with pytest.raises(params.ParameterError, match=rf"{name}: items \[7\] are above the 6 "
                                                    r"transformer layers of 'minilm'"):
        params.validate({name: [2, 7], "finetune": {"models": ["minilm"]}}, spec, partial=True)
    params.validate({name: [2, 6], "finetune": {"models": ["minilm"]}}, spec, partial=True)
    small = {"finetune": {"models": ["random:bert"]}, "model_options": {"layers": 3}}
    with pytest.raises(params.ParameterError, match=r"\[4\] are above the 3"):
        params.validate({**small, name: [2, 4]}, spec, partial=True)
    tiny = {"finetune": {"models": ["random:bert"]}, "model_options": {"layers": 2}}
    default = spec[name].default
    if default:  # the notebook's default counts on a 2-layer model too
        with pytest.raises(params.ParameterError, match=rf"\[{max(default)}\] are above the 2"):
            params.validate(tiny, spec, partial=True)
    else:  # an empty default (no partly frozen runs) fits any model
        params.validate(tiny, spec, partial=True)


def test_model_depths_are_read_without_loading_and_agree_with_the_loaded_model(tmp_path):
    from analysis_lib import models
    from analysis_lib.models import loading

    loaded = models.load("minilm")
    assert loading.depth_of("minilm") == loaded.info.n_attention_layers
    assert loading.depth_of("zoo:depth-2") == 2
    loaded.model.save_pretrained(tmp_path)
    assert loading.depth_of(str(tmp_path)) == loaded.info.n_attention_layers
    assert loading.depth_of("random:gpt2", {"layers": 3}) == models.load(
        "random:gpt2", layers=3, hidden=32, heads=2, vocab_size=2000,
        cache_dir=tmp_path / "c").info.n_attention_layers


@pytest.mark.parametrize("name", ["smoke", "default", "replica", "larger", "paper-shape",
                                  "paper"])
def test_every_shipped_profile_passes_the_checks_a_build_makes_before_it_runs(name):
    """Each profile in profiles/ sets only declared parameters with valid values (layer counts
    within the models' depths included), so a build of it stops on no check; the offline
    profiles' models are all available here."""
    from analysis_lib.book.builder import (
        check_models_available,
        check_profile_keys,
        load_profile,
        notebook_parameters,
        toc_notebooks,
    )

    profile = load_profile(name)
    notebooks = toc_notebooks()
    check_profile_keys(profile, notebooks, name)
    chosen = {path: notebook_parameters(path, profile, name) for path in notebooks}
    if name != "paper":  # the paper profile's models come from the hub
        check_models_available(chosen, name)


def test_a_parameter_papermill_injected_that_the_notebook_does_not_declare_is_refused():
    """papermill passes any -p name through; a misspelt one would leave the notebook on its
    defaults without a word. The check reads the injected cell back from the history."""
    history = ["", "import x", '# Parameters\nn_sentence = 50\nmodels = ["minilm"]\n']
    assert params.injected({"In": history}) == ["n_sentence", "models"]
    assert params.injected({}) == []
    values = {"In": history, "n_sentence": 50, "models": ["minilm"]}
    with pytest.raises(params.ParameterError,
                       match="'n_sentence' \\(did you mean 'n_sentences'\\?\\)"):
        params.check(values, "representation")


def test_text_given_where_a_mapping_is_declared_names_papermills_yaml_option():
    spec = params.declared("finetuning")
    with pytest.raises(params.ParameterError, match="give a dict with -y, e.g. -y 'finetune: "):
        params.validate({"finetune": "{'seeds': [0, 1]}"}, spec, partial=True)


def test_the_injected_cell_is_read_as_papermill_writes_it():
    """papermill's own translator writes the cell the check reads back (no kernel needed):
    its header, and every name it assigns."""
    from papermill.translators import PythonTranslator

    cell = PythonTranslator.codify({"n_stimulli": 100, "finetune": {"seeds": [0, 1]}},
                                   "Parameters")
    assert cell.startswith(params.INJECTED_HEADER)
    assert params.injected({"In": ["", cell]}) == ["n_stimulli", "finetune"]
    with pytest.raises(params.ParameterError, match="did you mean 'n_stimuli'"):
        params.check({"In": ["", cell]}, "measures_primer")
