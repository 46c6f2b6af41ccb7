import json

import numpy as np
import pandas as pd
import pytest

from analysis_lib.book import plots, render, widgets


def _find(spec, key):
    """Every value of ``key`` anywhere in a nested spec."""
    found = []
    if isinstance(spec, dict):
        for k, v in spec.items():
            if k == key:
                found.append(v)
            found += _find(v, key)
    elif isinstance(spec, list):
        for v in spec:
            found += _find(v, key)
    return found


def test_heatmap_tooltip_and_layer_order():
    labels = ["emb", "L1", "L2", "L10"]
    spec = plots.heatmap(np.eye(4), labels).to_dict()
    fields = {t["field"] for t in spec["encoding"]["tooltip"]}
    assert fields == {"row", "col", "value"}
    assert spec["encoding"]["x"]["scale"]["domain"] == labels  # not alphabetical


def test_collection_matrix_keeps_model_order_and_marks_boundaries():
    from analysis_lib.layers import LayerTable

    table = LayerTable.concat([LayerTable.for_model("b", "bert", True, 1),
                               LayerTable.for_model("a", "gpt2", False, 2)])
    labels = table.labels
    assert labels == ["b emb", "b L1", "a emb", "a L1", "a L2"]
    chart = plots.collection_matrix({"cka": np.eye(5), "svcca": np.eye(5)}, table)
    spec = chart.to_dict()
    assert all(d == labels for d in _find(spec, "domain") if isinstance(d, list)
               and len(d) == 5)
    rules = [r for data in spec["datasets"].values() for r in data if "at" in r]
    assert rules == [{"at": "a emb"}]
    assert any(p.get("name") == "measure" for p in _find(spec, "params")[0])


def test_slider_lines_binds_a_range_over_the_grid():
    frame = pd.DataFrame({"noise": [0.0, 0.0, 0.5, 0.5], "angle": [0, 45, 0, 45],
                          "value": [1, .8, .6, .5], "measure": "cka"})
    spec = plots.slider_lines(frame, slider="noise", x="angle").to_dict()
    [param] = spec["params"]
    assert param["bind"]["input"] == "range" and param["bind"]["max"] == 0.5


def test_learning_curves_draw_one_panel_per_run_group_with_its_frozen_head():
    curves = pd.DataFrame({"model": "m", "task": ["a"] * 4 + ["b"] * 4,
                           "seed": [0, 0, 1, 1] * 2, "epoch": [1, 2] * 4,
                           "validation_accuracy": [.5, .6, .55, .65, .3, .4, .35, .45]})
    spec = plots.learning_curves(curves, {("m", "a"): 0.58, ("m", "b"): 0.41}).to_dict()
    assert [panel["layer"][0]["title"] for panel in spec["concat"]] == ["m on a", "m on b"]
    rules = [r["at"] for data in spec["datasets"].values() for r in data if "at" in r]
    assert rules == [0.58, 0.41]
    seeds = {r["seed"] for data in spec["datasets"].values() for r in data if "seed" in r}
    assert seeds == {"0", "1"}  # one line per seed, coloured as categories
    one = plots.learning_curves(curves, 0.5, reference="full model").to_dict()
    rules = [r for data in one["datasets"].values() for r in data if "at" in r]
    assert rules == [{"reference": "full model", "at": 0.5}]  # one dataset, drawn twice


def test_matrix_frame_checks_labels():
    with pytest.raises(ValueError, match="does not fit"):
        plots.matrix_frame(np.eye(3), ["a", "b"])


def _bundle(chart) -> dict:
    bundle = chart._repr_mimebundle_()
    return bundle[0] if isinstance(bundle, tuple) else bundle


def test_renderer_output_has_native_and_offline_html_in_the_book(monkeypatch):
    monkeypatch.setenv(render.PAGE_ENV, "1")
    render.enable()
    bundle = _bundle(plots.heatmap(np.eye(2), ["a", "b"]))
    assert any(k.startswith("application/vnd.vegalite") for k in bundle)
    html = bundle["text/html"]
    assert "window.vegaEmbed" in html and "cdn" not in html.lower()
    # the page draws it from the HTML; the PNG is for the notebook the book serves for
    # download (render.serve drops the HTML there), so no SVG weighs on the page
    assert "image/png" in bundle and "image/svg+xml" not in bundle
    spec = plots.heatmap(np.eye(2), ["a", "</script>"]).to_dict()
    assert "</script>" in json.dumps(spec)
    assert render.chart_html(spec).count("</script>") == 1  # a label cannot close the tag


def test_outside_the_book_a_chart_is_an_image_every_front_end_shows(monkeypatch):
    """JupyterLab 4 renders vega-lite only up to 5 and runs no script of an untrusted
    output: off the book's build a chart carries vl-convert's SVG and PNG (no HTML that
    would need the book's vega bundle), drawn from the same spec."""
    import base64

    monkeypatch.delenv(render.PAGE_ENV, raising=False)
    render.enable()
    chart = plots.heatmap(np.array([[1.0, 0.25], [0.25, 1.0]]), ["layer a", "layer b"])
    bundle = _bundle(chart)
    assert "text/html" not in bundle and any(k.startswith("application/vnd.vegalite")
                                             for k in bundle)
    svg = bundle["image/svg+xml"]
    assert svg.lstrip().startswith("<svg") and "layer a" in svg and "<script" not in svg
    png = base64.b64decode(bundle["image/png"])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width > 50 and height > 50


def test_explorer_redraws_and_keeps_a_static_state():
    M = np.eye(3)
    explorer = widgets.MatrixExplorer({("m", "cka"): M, ("m", "svcca"): M / 2},
                                      ["emb", "L1", "L2"], measure="svcca")
    assert explorer.measure.value == "svcca"
    before = explorer.chart().to_dict()
    explorer.measure.value = "cka"
    assert explorer.chart().to_dict() != before
    bundle = explorer._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "Saved state" in bundle["text/html"] and "measure cka" in bundle["text/html"]


def test_on_a_book_page_the_explorer_draws_only_its_saved_state(monkeypatch):
    """In the book's build the explorer writes nothing into its Output widget (no kernel
    will read it; the page shows the saved state); in a live kernel it draws there."""
    M = np.eye(3)
    monkeypatch.setenv(render.PAGE_ENV, "1")
    page = widgets.MatrixExplorer({("m", "cka"): M}, ["emb", "L1", "L2"])
    assert page.out.outputs == ()
    assert "Saved state" in page._repr_mimebundle_()["text/html"]
    monkeypatch.delenv(render.PAGE_ENV)
    live = widgets.MatrixExplorer({("m", "cka"): M}, ["emb", "L1", "L2"])
    assert live.chart() is not None and page.chart().to_dict() == live.chart().to_dict()
