"""The altair charts every chapter uses.

* :func:`heatmap`: one layer x layer matrix, with both layer names and the value in the tooltip;
* :func:`heatmap_grid`: several matrices (models, measures) side by side on one colour scale;
* :func:`collection_matrix`: the matrix of a whole collection of models (its layers named by
  a :class:`~analysis_lib.layers.LayerTable`), with the boundaries between models marked and
  an optional dropdown to switch between measures;
* :func:`layer_lines`: per-layer values as lines with interval bands;
* :func:`slider_lines`: a line chart whose data hold a grid of settings, with a slider that
  picks one setting (nothing is recomputed in the page);
* :func:`attention_explorer`: word x word attention of a chosen sentence, layer and head, beside
  its best-matching head elsewhere (data from :func:`explorer_frame`).

Every function takes plain numpy arrays and label lists and returns an ``altair.Chart``;
:func:`matrix_frame` gives the long table behind a matrix for your own charts.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any, Final

import altair as alt
import numpy as np
import pandas as pd

from ..layers import LayerTable, layer_label
from ..similarity import AttentionLayer

#: the colour scheme of every heatmap
SCHEME: Final = "viridis"
#: what a function of this module returns: a chart, or charts layered, faceted or arranged
ChartLike = (alt.Chart | alt.LayerChart | alt.FacetChart | alt.ConcatChart | alt.HConcatChart
             | alt.VConcatChart)


def matrix_frame(M: np.ndarray, rows: Sequence[str], cols: Sequence[str] | None = None,
                 **columns: object) -> pd.DataFrame:
    """Long table of a matrix: one row per cell with ``row``, ``col``, ``value``, the
    positions ``i`` and ``j``, and any extra constant columns (``measure="cka"``)."""
    M = np.asarray(M, dtype=float)
    cols = rows if cols is None else cols
    if M.shape != (len(rows), len(cols)):
        raise ValueError(f"matrix of shape {M.shape} does not fit {len(rows)} row labels and "
                         f"{len(cols)} column labels")
    i, j = np.meshgrid(np.arange(len(rows)), np.arange(len(cols)), indexing="ij")
    frame = pd.DataFrame({"i": i.ravel(), "j": j.ravel(), "row": np.asarray(rows)[i.ravel()],
                          "col": np.asarray(cols)[j.ravel()], "value": M.ravel()})
    for name, value in columns.items():
        frame[name] = value
    return frame


def _rect(data, rows, cols, title, domain, size, facet=None):
    color = alt.Color("value:Q", title="similarity",
                      scale=alt.Scale(scheme=SCHEME, domain=list(domain) if domain else
                                      alt.Undefined))
    tooltip = [alt.Tooltip("row:N", title="layer (row)"), alt.Tooltip("col:N",
                                                                       title="layer (column)"),
               alt.Tooltip("value:Q", title="similarity", format=".3f")]
    if facet:
        tooltip.insert(0, alt.Tooltip(f"{facet}:N"))
    return alt.Chart(data, title=title).mark_rect().encode(
        x=alt.X("col:N", sort=list(cols), title=None, axis=alt.Axis(labelAngle=-45),
                scale=alt.Scale(domain=list(cols))),
        y=alt.Y("row:N", sort=list(rows), title=None, scale=alt.Scale(domain=list(rows))),
        color=color, tooltip=tooltip,
    ).properties(width=size, height=size)


def heatmap(M: np.ndarray, rows: Sequence[str], cols: Sequence[str] | None = None, *,
            title: str = "", domain: tuple[float, float] | None = (0, 1),
            size: int = 280) -> ChartLike:
    """Layer x layer heatmap. ``M[i, j]`` is drawn at row ``rows[i]``, column ``cols[j]``."""
    cols = rows if cols is None else cols
    return _rect(matrix_frame(M, rows, cols), rows, cols, title, domain, size)


def heatmap_grid(matrices: Mapping[str, np.ndarray], rows: Sequence[str] | Mapping,
                 cols: Sequence[str] | Mapping | None = None, *, columns: int = 3,
                 domain: tuple[float, float] | None = (0, 1), size: int = 200,
                 title: str = "") -> ChartLike:
    """Several matrices on one colour scale, one panel per entry of ``matrices`` (its name
    in the data's ``panel`` column). NaN cells (undefined similarities) are left blank.

    ``rows``/``cols`` are one label list for all, or a mapping from panel name to labels.
    """
    panels = []
    for name, M in matrices.items():
        r = rows[name] if isinstance(rows, Mapping) else rows
        c = r if cols is None else (cols[name] if isinstance(cols, Mapping) else cols)
        panels.append(_rect(matrix_frame(M, r, c, panel=name), r, c, name, domain, size))
    grid = alt.concat(*panels, columns=columns, title=title)
    return grid.resolve_scale(color="shared")


def collection_matrix(matrices: Mapping[str, np.ndarray] | np.ndarray, table: LayerTable, *,
                      title: str = "", size: int = 420,
                      domain: tuple[float, float] | None = (0, 1)) -> ChartLike:
    """Heatmap of every layer of a collection of models against every other (the layers of
    ``table``, in its order), with lines at the boundaries between models. Given several
    matrices (``{measure: M}``) a dropdown in the chart switches between them."""
    labels, owners = table.labels, list(table.owners)
    if not isinstance(matrices, Mapping):
        matrices = {"similarity": matrices}
    frames = [matrix_frame(M, labels, labels, measure=name) for name, M in matrices.items()]
    data = pd.concat(frames, ignore_index=True)
    names = list(matrices)
    base = _rect(data, labels, labels, title, domain, size, facet="measure")
    if len(names) > 1:
        pick = alt.param(name="measure", value=names[0],
                         bind=alt.binding_select(options=names, name="measure "))
        base = base.add_params(pick).transform_filter(alt.datum.measure == pick)
    starts = [k for k in range(1, len(owners)) if owners[k] != owners[k - 1]]
    if not starts:
        return base
    bounds = pd.DataFrame({"at": [labels[k] for k in starts]})
    vertical = alt.Chart(bounds).mark_rule(color="white", strokeWidth=2).encode(
        x=alt.X("at:N", sort=list(labels), bandPosition=0,
                scale=alt.Scale(domain=list(labels))))
    horizontal = alt.Chart(bounds).mark_rule(color="white", strokeWidth=2).encode(
        y=alt.Y("at:N", sort=list(labels), bandPosition=0,
                scale=alt.Scale(domain=list(labels))))
    return alt.layer(base, vertical, horizontal)


def panels(charts: Sequence[ChartLike], *, columns: int = 2, title: str = "") -> ChartLike:
    """Several charts in a grid of ``columns`` columns."""
    if not charts:
        raise ValueError("no charts to arrange")
    return alt.concat(*charts, columns=columns, title=title)


def layer_lines(frame: pd.DataFrame, *, x: str = "layer", y: str = "value",
                color: str | None = "model", low: str | None = "low", high: str | None = "high",
                title: str = "", width: int = 380, height: int = 240,
                y_title: str | None = None, rules: Mapping[str, float] | None = None
                ) -> ChartLike:
    """Per-layer lines (one per ``color`` group) with a band from ``low`` to ``high`` where
    those columns exist (e.g. bootstrap intervals), and dashed horizontal ``rules``
    (``{"majority": 0.43}``) labelled in the tooltip."""
    enc_color = alt.Color(f"{color}:N") if color else alt.Undefined
    tooltip = [c for c in (color, x, y, low, high) if c and c in frame.columns]
    line = alt.Chart(frame, title=title).mark_line(point=True).encode(
        x=alt.X(f"{x}:O", sort=None), y=alt.Y(f"{y}:Q", title=y_title or y), color=enc_color,
        tooltip=tooltip)
    layers = [line]
    if low in frame.columns and high in frame.columns:
        layers.insert(0, alt.Chart(frame).mark_area(opacity=0.25).encode(
            x=alt.X(f"{x}:O", sort=None), y=f"{low}:Q", y2=f"{high}:Q", color=enc_color))
    if rules:
        marks = pd.DataFrame({"reference": list(rules), "at": [float(v) for v in
                                                               rules.values()]})
        layers.append(alt.Chart(marks).mark_rule(strokeDash=[4, 3], color="gray").encode(
            y="at:Q", tooltip=["reference:N", alt.Tooltip("at:Q", format=".3f")]))
    if len(layers) == 1:
        return line.properties(width=width, height=height)
    return alt.layer(*layers).properties(width=width, height=height)


def _reference(frozen: Any, model: str, task: str) -> float:
    """The reference accuracy of one panel: one number for all, or the (model, task) entry of
    a mapping or a Series indexed by (model, task)."""
    return float(frozen) if isinstance(frozen, numbers.Real) else float(frozen[(model, task)])


def learning_curves(curves: pd.DataFrame,
                    frozen: Mapping[tuple[str, str], float] | pd.Series | float, *,
                    columns: int = 2, title: str = "",
                    reference: str = "frozen head (test split)") -> ChartLike:
    """One panel per (model, task) of ``curves`` (the table the fine-tuning chapter's
    ``learning_curves`` gives): validation accuracy after each epoch, one line per seed, with a
    reference accuracy (``frozen[(model, task)]``, or one number for every panel; by
    default the frozen head's on the test split, ``reference`` names it) as a dashed rule."""
    charts = []
    for (model, task), group in curves.groupby(["model", "task"], sort=False):
        charts.append(layer_lines(
            group.astype({"seed": str}), x="epoch", y="validation_accuracy", color="seed",
            title=f"{model} on {task}", y_title="validation accuracy",
            rules={reference: _reference(frozen, model, task)}))
    return panels(charts, columns=columns, title=title)


def loss_curves(curves: pd.DataFrame, *, columns: int = 2, title: str = "") -> ChartLike:
    """One panel per (model, task) of ``curves`` (the table the fine-tuning chapter's
    ``loss_curves`` gives): the training loss at evenly spaced steps, one line per seed; a run that
    failed the training gate is named so in the legend."""
    charts = []
    for (model, task), group in curves.groupby(["model", "task"], sort=False):
        run = group.seed.astype(str).where(group.did_not_train == "",
                                           group.seed.astype(str) + " (did not train)")
        charts.append(layer_lines(
            group.assign(run=run), x="step", y="train_loss", color="run", low=None,
            high=None, title=f"{model} on {task}", y_title="training loss"))
    return panels(charts, columns=columns, title=title)


def span_heatmap(frame: pd.DataFrame, *, value: str = "accuracy", title: str = "",
                 size: int = 240) -> ChartLike:
    """Scores of skipped spans: row ``first``, column ``last`` skipped layer (upper triangle
    only); single-layer skips (the diagonal) are outlined and the score is in each cell."""
    layers = sorted(set(frame["first"]) | set(frame["last"]))
    base = alt.Chart(frame, title=title).encode(
        x=alt.X("last:O", sort=layers, title="last skipped layer",
                scale=alt.Scale(domain=layers)),
        y=alt.Y("first:O", sort=layers, title="first skipped layer",
                scale=alt.Scale(domain=layers)))
    cells = base.mark_rect().encode(
        color=alt.Color(f"{value}:Q", scale=alt.Scale(scheme=SCHEME), title=value),
        stroke=alt.condition("datum.single", alt.value("white"), alt.value(None)),
        strokeWidth=alt.condition("datum.single", alt.value(2), alt.value(0)),
        tooltip=["first:O", "last:O", alt.Tooltip(f"{value}:Q", format=".3f"), "single:N"])
    text = base.mark_text(fontSize=9, color="white").encode(
        text=alt.Text(f"{value}:Q", format=".2f"))
    return alt.layer(cells, text).properties(width=size, height=size)


def scatter(frame: pd.DataFrame, *, x: str, y: str, color: str | None = None,
            title: str = "", width: int = 360, height: int = 240) -> ChartLike:
    """Points of ``y`` against ``x`` (coloured by ``color``), every column in the tooltip."""
    enc_color = alt.Color(f"{color}:N") if color else alt.Undefined
    return alt.Chart(frame, title=title).mark_circle(size=70).encode(
        x=alt.X(f"{x}:Q", scale=alt.Scale(zero=False)),
        y=alt.Y(f"{y}:Q", scale=alt.Scale(zero=False)), color=enc_color,
        tooltip=list(frame.columns)).properties(width=width, height=height)


def slider_lines(frame: pd.DataFrame, *, slider: str, x: str, y: str = "value",
                 color: str = "measure", title: str = "", width: int = 380, height: int = 240,
                 x_title: str | None = None) -> ChartLike:
    """Lines of ``y`` against ``x`` for the setting of ``slider`` picked with a slider.

    ``frame`` holds every setting: the slider only filters the rows that are drawn, so the
    static page recomputes nothing. The slider snaps to the values present in the data.
    """
    values = np.sort(frame[slider].unique())
    step = float(np.min(np.diff(values))) if len(values) > 1 else 1.0
    pick = alt.param(name=slider.replace(" ", "_"), value=float(values[0]),
                     bind=alt.binding_range(min=float(values[0]), max=float(values[-1]),
                                            step=step, name=f"{slider} "))
    return alt.Chart(frame, title=title).mark_line(point=True).encode(
        x=alt.X(f"{x}:Q", title=x_title or x), y=alt.Y(f"{y}:Q", title=y,
                                                       scale=alt.Scale(domain=[0, 1])),
        color=f"{color}:N", tooltip=[color, x, alt.Tooltip(f"{y}:Q", format=".3f")],
    ).add_params(pick).transform_filter(
        f"abs(datum['{slider}'] - {pick.name}) < {step / 2}"
    ).properties(width=width, height=height)


def layer_labels(n_transformer: int) -> list[str]:
    """``["emb", "L1", ..., "L<n>"]``: axis labels of one model's layers."""
    return [layer_label("", k).strip() for k in range(n_transformer + 1)]


def explorer_sentences(sentences: Sequence[Sequence[str]], count: int, *, min_words: int = 4,
                       max_words: int = 12) -> list[int]:
    """The positions of the ``count`` shortest of ``sentences`` (each a list of words) with
    ``min_words`` to ``max_words`` words (the explorer's page holds every head's map of
    each, so short sentences keep it small)."""
    lengths = np.array([len(s) for s in sentences])
    fits = np.flatnonzero((lengths >= min_words) & (lengths <= max_words))
    if not fits.size:
        fits = np.arange(len(lengths))
    return [int(i) for i in fits[np.argsort(lengths[fits], kind="stable")][:count]]


def explorer_frame(layers: Sequence[AttentionLayer], labels: Sequence[str],
                   sentences: Sequence[Sequence[str]], matches: pd.DataFrame,
                   chosen: Sequence[int]) -> pd.DataFrame:
    """The data of :func:`attention_explorer`: one row per chosen sentence (positions in
    ``sentences``), layer, head and panel (``"chosen"``, or ``"best match"`` for the head's
    best match in ``matches``, as :func:`analysis_lib.similarity.attention.best_matches`
    gives them), holding the sentence's words and the word x word map flattened row by row
    (``weights``, rounded to 3 decimals); the chart unpacks only the map on show.
    ``labels[k]`` is the label of ``layers[k]``."""
    index = {label: k for k, label in enumerate(labels)}
    records = []
    for s in chosen:
        words = [f"{k + 1} {w}" for k, w in enumerate(sentences[s])]
        n = len(words)
        for row in matches.itertuples():
            panels = [("chosen", row.layer, row.head, f"{row.layer} head {row.head}")]
            if row.match_layer:
                panels.append(("best match", row.match_layer, row.match_head,
                               f"{row.match_layer} head {row.match_head} "
                               f"(similarity {row.similarity:.2f})"))
            for panel, layer, head, source in panels:
                weights = layers[index[layer]].maps[s][head][:, :n]
                records.append({"sentence": int(s), "layer": row.layer, "head": int(row.head),
                                "panel": panel, "source": source, "n": n, "words": words,
                                "weights": np.round(weights.ravel(), 3).tolist(),
                                "cell": list(range(n * n))})
    return pd.DataFrame(records)


def attention_explorer(frame: pd.DataFrame, *, size: int = 210) -> ChartLike:
    """Pick a sentence, a layer and a head (controls under the chart) and see its word x word
    attention (rows: from, columns: to) beside its best-matching head. Every map is in the
    data (one row per map, unpacked in the page only for the map on show), so the static
    page recomputes nothing."""
    sentences = sorted(frame["sentence"].unique().tolist())
    layers = list(dict.fromkeys(frame["layer"]))
    heads = int(frame["head"].max())
    sentence = alt.param(name="sentence", value=sentences[0],
                         bind=alt.binding_select(options=sentences, name="sentence "))
    layer = alt.param(name="layer", value=layers[0],
                      bind=alt.binding_select(options=layers, name="layer "))
    head = alt.param(name="head", value=0,
                     bind=alt.binding_range(min=0, max=max(heads, 1), step=1, name="head "))
    chosen = ((alt.datum.sentence == sentence) & (alt.datum.layer == layer)
              & (alt.datum.head == head))

    def panel(name):
        base = alt.Chart(frame).transform_filter(chosen).transform_filter(
            alt.datum.panel == name)
        cells = base.transform_flatten(["weights", "cell"], as_=["weight", "cell"]
                                       ).transform_calculate(
            i="floor(datum.cell / datum.n)", j="datum.cell % datum.n",
        ).transform_calculate(
            **{"from": "datum.words[datum.i]", "to": "datum.words[datum.j]"}
        ).mark_rect().encode(
            x=alt.X("to:N", sort=alt.EncodingSortField("j"), title="to"),
            y=alt.Y("from:N", sort=alt.EncodingSortField("i"), title="from"),
            color=alt.Color("weight:Q", scale=alt.Scale(scheme="blues", domain=[0, 1]),
                            title="attention"),
            tooltip=["source:N", "from:N", "to:N", alt.Tooltip("weight:Q", format=".3f")],
        ).properties(width=size, height=size)
        caption = base.mark_text(align="left", fontSize=12).encode(
            text="source:N", x=alt.value(0), y=alt.value(-8))
        return alt.layer(cells, caption, title=name)

    return alt.hconcat(panel("chosen"), panel("best match")).add_params(
        sentence, layer, head).resolve_scale(x="independent", y="independent")
