"""The book: its build, notebook parameters, charts, the offline chart renderer, widgets.

``builder``  run every notebook with papermill under a profile, then Jupyter Book, strictly
``params``   the parameters a notebook declares, checked before and while it runs
``plots``    the altair charts every chapter uses
``render``   an altair renderer that draws charts with no internet
``widgets``  ipywidgets explorers for live notebooks
"""

from .builder import (
    ROOT,
    BuildError,
    build,
    execute,
    jupyter_book,
    library_fingerprint,
    load_profile,
    notebook_parameters,
    stage,
    toc_notebooks,
)

__all__ = ["ROOT", "BuildError", "build", "execute", "jupyter_book", "library_fingerprint",
           "load_profile", "notebook_parameters", "stage", "toc_notebooks"]
