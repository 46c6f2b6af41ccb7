"""ipywidgets explorers for live use in Jupyter.

:class:`MatrixExplorer` picks a model (or model pair) and a measure from dropdowns and redraws
the layer x layer heatmap. In a live kernel it is an interactive widget; in the static book,
where no kernel runs, it shows its saved state: the chart for the current choice, drawn by the
offline renderer (:mod:`analysis_lib.book.render`), next to the in-page altair chart that switches
measures without a kernel.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import ipywidgets as widgets
import numpy as np
from IPython.display import display

from . import plots, render


class MatrixExplorer(widgets.VBox):
    """Dropdowns for model and measure above a heatmap that redraws on change.

    Parameters
    ----------
    matrices : mapping ``{(model, measure): matrix}``
    labels : mapping ``{model: layer labels}`` or one list for all (the rows)
    model, measure : the initial choice (defaults: the first of each, e.g. the notebook's
        parameters)
    col_labels : like ``labels``, for the columns when they differ from the rows
    """

    def __init__(self, matrices: Mapping[tuple[str, str], np.ndarray],
                 labels: Mapping[str, Sequence[str]] | Sequence[str], *,
                 model: str | None = None, measure: str | None = None,
                 col_labels: Mapping[str, Sequence[str]] | Sequence[str] | None = None,
                 domain: tuple[float, float] | None = (0, 1)):
        if not matrices:
            raise ValueError("matrices is empty: nothing to explore")
        self.matrices = dict(matrices)
        self.labels = labels
        self.col_labels = labels if col_labels is None else col_labels
        self.domain = domain
        models = list(dict.fromkeys(m for m, _ in self.matrices))
        measures = list(dict.fromkeys(s for _, s in self.matrices))
        self.model = widgets.Dropdown(options=models, value=model or models[0],
                                      description="model")
        self.measure = widgets.Dropdown(options=measures, value=measure or measures[0],
                                        description="measure")
        self.out = widgets.Output()
        for control in (self.model, self.measure):
            control.observe(lambda change: self.redraw(), names="value")
        super().__init__([widgets.HBox([self.model, self.measure]), self.out])
        # a book page shows the explorer's saved state (_repr_mimebundle_), drawn without a
        # kernel: the build writes nothing into the Output widget, whose messages are the
        # ones a build has been left waiting on
        if not os.environ.get(render.PAGE_ENV):
            self.redraw()

    def chart(self) -> plots.ChartLike | None:
        """The altair chart of the current choice (None when no matrix has that choice)."""
        key = (self.model.value, self.measure.value)
        if key not in self.matrices:
            return None
        rows = self.labels[key[0]] if isinstance(self.labels, Mapping) else self.labels
        cols = (self.col_labels[key[0]] if isinstance(self.col_labels, Mapping)
                else self.col_labels)
        return plots.heatmap(self.matrices[key], rows, cols, title=f"{key[0]} - {key[1]}",
                             domain=self.domain)

    def redraw(self) -> None:
        self.out.clear_output(wait=True)
        with self.out:
            chart = self.chart()
            if chart is None:
                print(f"no matrix for {self.model.value!r} and {self.measure.value!r}")
            else:
                display(chart)

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        if isinstance(bundle, tuple):
            bundle = bundle[0]
        chart = self.chart()
        if chart is not None:
            bundle = dict(bundle)
            bundle["text/html"] = (
                f"<p><em>Saved state of the explorer: model {self.model.value}, measure "
                f"{self.measure.value}. Run the notebook to change them.</em></p>"
                + render.chart_html(chart.to_dict()))
        return bundle
