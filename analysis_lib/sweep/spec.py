"""A sweep's grid, declared: which models, seeds, tasks and measures, and the units it makes.

A spec is a YAML file (or the same mapping in Python)::

    name: wu-small
    corpus: tweets            # a registered corpus (analysis-lib corpora), or ./my_text.txt
    n_sentences: 200
    models: ["minilm", "random:bert", "random:gpt2"]
    model_options: {layers: 4, hidden: 128}     # random: models only
    seeds: [0, 1, 2]          # initialisation seeds of random: models; fine-tuning seeds
    tasks: []                 # optional: fine-tune every model on each task first
    finetune: {epochs: 8, n_train: 600}   # the book's fine-tuning grid: the runs the
                              # chapters read (analysis_lib.training.grid.FinetuneGrid)
    measures: [linear_cka, svcca]
    measure_options: {svcca: {variance: 0.99}}
    kind: words               # words | first | last | mean (sentence vectors)
    max_words: 2000
    pairs: all                # all | within (same model) | across (different models)
    self_pairs: false         # also each variant with itself (the full heatmap's diagonal
                              # blocks, as the representation page needs)
    layers: all               # or a list of layer indices, 0 = embeddings
    retries: 1
    threads_per_unit: 1
    max_units: 5000           # a larger grid is refused before it starts (raise on purpose)

:func:`plan` turns it into units of work, each one of the library's cached steps:
``finetune`` (each run of the fine-tuning grid,
:meth:`~analysis_lib.training.grid.FinetuneGrid.runs`: the same runs, under the same cache
keys, as a chapter's), ``extract`` (one model variant on the corpus) and ``measure`` (two
variants x one measure: a layer x layer matrix), with the dependencies between them.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ..data.corpora import is_corpus_file, list_corpora
from ..data.tasks import TASKS
from ..models.loading import check_name, random_options
from ..rules import ParameterError
from ..runtime import checks
from ..similarity.registry import canonical
from ..training.grid import FinetuneGrid

PAIRS = ("all", "within", "across")
KINDS = ("words", "first", "last", "mean")


@dataclass(frozen=True)
class SweepSpec:
    """A grid of models x seeds (x tasks) x measures on one corpus; see the module doc."""

    name: str
    models: list[str]
    measures: list[str]
    corpus: str = "tweets"
    n_sentences: int | None = 200
    corpus_seed: int = 0
    model_options: dict[str, Any] = field(default_factory=dict)
    seeds: list[int] = field(default_factory=lambda: [0])
    tasks: list[str] = field(default_factory=list)
    finetune: dict[str, Any] = field(default_factory=dict)
    extract_options: dict[str, Any] = field(default_factory=dict)
    measure_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    kind: str = "words"
    max_words: int | None = None
    pairs: str = "all"
    self_pairs: bool = False
    layers: str | list[int] = "all"
    retries: int = 1
    threads_per_unit: int = 1
    max_units: int = 5000

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def digest(self) -> str:
        """A short fingerprint of every setting (recorded in the result table)."""
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def load_spec(source: str | Path | dict[str, Any]) -> SweepSpec:
    """Read a spec from a YAML file (plain values only: a tagged value is refused) or a
    mapping, and check it."""
    if isinstance(source, dict):
        raw, where = source, "the sweep spec"
    else:
        from ..runtime.plain_yaml import read_yaml

        path = checks.existing_file(source, "sweep spec", "pass its YAML file (see "
                                    "book/running.md) or a mapping to load_spec")
        where = f"sweep spec {path}"
        raw = read_yaml(path.read_text(encoding="utf-8"), source=where)
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be a mapping of settings, got {type(raw).__name__}")
    if "task_options" in raw:
        raise ValueError(f"{where}: task_options is no longer a setting: the training and "
                         "held-out sizes are fine-tuning grid settings, e.g. finetune: "
                         "{n_train: 600, n_heldout: 500}")
    known = {f.name for f in fields(SweepSpec)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"{where} has unknown settings {unknown}; the settings are "
                         f"{sorted(known)}")
    missing = [k for k in ("name", "models", "measures") if k not in raw]
    if missing:
        raise ValueError(f"{where} lacks {missing}: a sweep needs a name, models and measures")
    return check_spec(SweepSpec(**raw), where)


def _str_list(value: Any, name: str, where: str, allow_empty: bool = False) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"{where}: {name} must be a list of names, got {value!r}")
    if not value and not allow_empty:
        raise ValueError(f"{where}: {name} is empty; list at least one")
    if len(set(value)) != len(value):
        raise ValueError(f"{where}: {name} lists a name twice: {value!r}")
    return value


def _mapping(value: Any, name: str, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{where}: {name} must be a mapping, got {value!r}")
    return value


def _count(value: Any, name: str, where: str, minimum: int, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{where}: {name} must be an integer >= {minimum}"
                         f"{' or null' if optional else ''}, got {value!r}")


def check_spec(spec: SweepSpec, where: str = "the sweep spec") -> SweepSpec:
    """Check every setting's type and range; a ``ValueError`` names the setting and the fix.

    Names that mean the same on every machine are checked here (``random:`` families, zoo
    models, corpora, tasks); folders and hub ids are not resolved: a name may exist only
    where the units run (a folder on a cluster's shared disk), and a unit whose model does
    not load fails alone.
    """
    _check_names(spec, where)
    _check_numbers(spec, where)
    _check_settings(spec, where)
    _check_finetune(spec, where)
    if len(variants(spec)) < 2:
        raise ValueError(f"{where}: the grid has one model variant; a comparison needs two "
                         "(add a model, a seed or a task)")
    return spec


def _check_names(spec: SweepSpec, where: str) -> None:
    """The name, the lists of models, measures and tasks, and the corpus."""
    if not isinstance(spec.name, str) or not spec.name.strip():
        raise ValueError(f"{where}: name must be a non-empty string")
    if not _safe_name(spec.name):
        raise ValueError(f"{where}: name {spec.name!r} becomes the folder sweeps/<name>, so it "
                         "may hold letters, digits, '.', '_' and '-' only (no '/', no leading "
                         "'.'); e.g. 'wu-grid'")
    for m in _str_list(spec.models, "models", where):
        if m.startswith(("random:", "zoo:")):
            try:
                check_name(m)
            except ValueError as error:
                raise ValueError(f"{where}: models: {error}") from None
    for m in _str_list(spec.measures, "measures", where):
        canonical(m)
    unknown = [t for t in _str_list(spec.tasks, "tasks", where, allow_empty=True)
               if t not in TASKS]
    if unknown:
        raise ValueError(f"{where}: unknown tasks {unknown}; valid: {list(TASKS)}")
    if isinstance(spec.corpus, str) and is_corpus_file(spec.corpus):
        checks.existing_file(spec.corpus, f"{where}: corpus file",
                             "pass a text file with one sentence per line")
    elif not isinstance(spec.corpus, str) or spec.corpus not in list_corpora():
        raise ValueError(f"{where}: corpus must be one of {sorted(list_corpora())}, or the "
                         f"path of a text file (one sentence per line), got {spec.corpus!r}")


def _check_numbers(spec: SweepSpec, where: str) -> None:
    """Counts, seeds and layer indices."""
    _count(spec.n_sentences, "n_sentences", where, 2, optional=True)
    _count(spec.corpus_seed, "corpus_seed", where, 0)
    _count(spec.max_words, "max_words", where, 2, optional=True)
    _count(spec.retries, "retries", where, 0)
    _count(spec.threads_per_unit, "threads_per_unit", where, 1)
    _count(spec.max_units, "max_units", where, 1)
    if (not isinstance(spec.seeds, list) or not spec.seeds
            or not all(_index(s) for s in spec.seeds) or len(set(spec.seeds)) != len(spec.seeds)):
        raise ValueError(f"{where}: seeds must be a list of distinct integers >= 0, "
                         f"got {spec.seeds!r}")
    if spec.layers != "all" and (not isinstance(spec.layers, list) or not spec.layers
                                 or not all(_index(v) for v in spec.layers)):
        raise ValueError(f"{where}: layers must be 'all' or a list of layer indices >= 0 "
                         f"(0 = embeddings), got {spec.layers!r}")


def _safe_name(name: str) -> bool:
    """Whether ``name`` is one plain folder name (nothing that climbs or nests folders)."""
    return (name[0] != "." and len(name) <= 100
            and all(c.isascii() and (c.isalnum() or c in "._-") for c in name))


def _index(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_settings(spec: SweepSpec, where: str) -> None:
    """The option mappings, the kind and the pairs."""
    for name in ("model_options", "finetune", "extract_options",
                 "measure_options"):
        _mapping(getattr(spec, name), name, where)
    from ..extract import check_spec_options

    try:
        check_spec_options(spec.extract_options)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: {error}") from None
    measures = {canonical(x) for x in spec.measures}
    for m, opts in spec.measure_options.items():
        if canonical(m) not in measures:
            raise ValueError(f"{where}: measure_options names {m!r}, which is not in measures")
        _mapping(opts, f"measure_options[{m!r}]", where)
    if spec.kind not in KINDS:
        raise ValueError(f"{where}: kind must be one of {KINDS}, got {spec.kind!r}")
    if spec.pairs not in PAIRS:
        raise ValueError(f"{where}: pairs must be one of {PAIRS}, got {spec.pairs!r}")
    if not isinstance(spec.self_pairs, bool):
        raise ValueError(f"{where}: self_pairs must be true or false, got {spec.self_pairs!r}")


def _check_finetune(spec: SweepSpec, where: str) -> None:
    """The fine-tuning settings: the book's grid settings, checked by the grid's rules."""
    if spec.finetune and not spec.tasks:
        raise ValueError(f"{where}: finetune settings are given but tasks is empty; list the "
                         "tasks to fine-tune on, or drop the finetune settings")
    placed = sorted({"models", "tasks", "seeds"} & set(spec.finetune))
    if placed:
        raise ValueError(f"{where}: finetune names {placed}; a sweep gives its models, tasks "
                         "and seeds at the top of the spec")
    try:
        FinetuneGrid.of(spec.finetune)
    except ParameterError as error:
        raise ValueError(f"{where}: {error}") from None


@dataclass(frozen=True)
class Variant:
    """One model as the grid uses it: a base model, a seed and optionally a task."""

    model: str
    seed: int | None
    task: str | None = None

    @property
    def label(self) -> str:
        parts = [self.model]
        if self.task:
            parts.append(self.task)
        if self.seed is not None:
            parts.append(f"seed {self.seed}")
        return " / ".join(parts)

    @property
    def slug(self) -> str:
        """The label as a cache-key-safe word, such as ``random-bert_s0``."""
        parts = [self.model.replace(":", "-").replace("/", "-")]
        if self.task:
            parts.append(self.task)
        if self.seed is not None:
            parts.append(f"s{self.seed}")
        return "_".join(parts)


def finetune_grid(spec: SweepSpec) -> FinetuneGrid:
    """The spec's fine-tuning grid: its models, tasks and seeds with its ``finetune``
    settings, the grid a chapter builds from the same values."""
    return FinetuneGrid.of(spec.finetune).only(models=spec.models, tasks=spec.tasks,
                                               seeds=spec.seeds)


def variants(spec: SweepSpec) -> list[Variant]:
    """The grid's model variants. A seed varies a ``random:`` model's initialisation and a
    fine-tuning run; a pretrained model without tasks has no seed and appears once. With
    tasks, the variants are the fine-tuning grid's runs, in its order."""
    if spec.tasks:
        return [Variant(model, seed, task) for model, task, seed in finetune_grid(spec).runs()]
    out = []
    for model in spec.models:
        if model.startswith("random:"):
            out += [Variant(model, s) for s in spec.seeds]
        else:
            out.append(Variant(model, None))
    return out


@dataclass(frozen=True)
class Unit:
    """One cached step of the grid: ``key`` (unique), ``stage``, the plain-valued
    ``params`` it runs with, the keys of the units it needs and the grid ``axes`` it fills."""

    key: str
    stage: str
    params: dict[str, Any]
    deps: tuple[str, ...] = ()
    axes: dict[str, Any] = field(default_factory=dict)


def _unit_key(stage: str, label: str, params: dict[str, Any]) -> str:
    text = json.dumps(params, sort_keys=True)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]
    clean = "".join(c if c.isalnum() or c in "-_." else "-" for c in label)
    return f"{stage}-{clean}-{digest}"


def _pairs(spec: SweepSpec, found: list[Variant]) -> list[tuple[Variant, Variant]]:
    pairs = list(itertools.combinations(found, 2))
    if spec.pairs == "within":
        pairs = [(a, b) for a, b in pairs if a.model == b.model]
    elif spec.pairs == "across":
        pairs = [(a, b) for a, b in pairs if a.model != b.model]
    if spec.self_pairs:
        pairs = [(v, v) for v in found] + pairs
    if not pairs:
        raise ValueError(f"pairs={spec.pairs!r} leaves no pair of variants to compare; "
                         "use pairs: all, or add models or seeds")
    return pairs


def plan(spec: SweepSpec) -> list[Unit]:
    """The grid's units in an order where every unit follows the units it needs."""
    units: list[Unit] = []
    extract_of: dict[Variant, str] = {}
    corpus = {"name": spec.corpus, "n": spec.n_sentences, "seed": spec.corpus_seed}
    if is_corpus_file(spec.corpus):  # every worker reads the same file; its text keys units
        path = Path(spec.corpus).expanduser().absolute()
        corpus.update(name=str(path), text=hashlib.sha256(path.read_bytes()).hexdigest()[:24])
    for v in variants(spec):
        options = random_options(v.model, spec.model_options)
        if v.model.startswith("random:") and v.seed is not None:
            options["seed"] = v.seed
        deps: tuple[str, ...] = ()
        axes = {"model": v.model, "seed": v.seed, "task": v.task}
        if v.task:
            ft = {"model": v.model, "task": v.task, "seed": v.seed, "load_options": options,
                  "finetune": spec.finetune,
                  "threads": spec.threads_per_unit}
            ft_key = _unit_key("finetune", v.slug, ft)
            units.append(Unit(ft_key, "finetune", ft, (), axes))
            deps, options = (ft_key,), {}
        params = {"model": v.model, "load_options": options, "corpus": corpus,
                  "extract_options": spec.extract_options, "threads": spec.threads_per_unit}
        key = _unit_key("extract", v.slug, {**params, "after": list(deps)})
        units.append(Unit(key, "extract", params, deps, axes))
        extract_of[v] = key
    for a, b in _pairs(spec, variants(spec)):
        for measure in spec.measures:
            options = next((o for m, o in spec.measure_options.items()
                            if canonical(m) == canonical(measure)), {})
            params = {"measure": canonical(measure), "options": options, "kind": spec.kind,
                      "max_words": spec.max_words, "layers": spec.layers,
                      "row_seed": spec.corpus_seed, "threads": spec.threads_per_unit}
            key = _unit_key("measure", f"{a.slug}-vs-{b.slug}-{canonical(measure)}",
                            {**params, "a": extract_of[a], "b": extract_of[b]})
            axes = {"model_a": a.model, "seed_a": a.seed, "task_a": a.task,
                    "model_b": b.model, "seed_b": b.seed, "task_b": b.task,
                    "measure": canonical(measure)}
            units.append(Unit(key, "measure", params, (extract_of[a], extract_of[b]), axes))
    return units
