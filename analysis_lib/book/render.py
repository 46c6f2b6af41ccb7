"""Show altair charts in JupyterLab and in the built book, with no internet.

altair's default renderer loads the vega libraries from a CDN, which the offline book cannot
reach, and altair 6's vega-lite 6 mime type is one that JupyterLab 4 does not render (it
renders vega-lite up to 5). :func:`enable` registers a renderer, ``"book"``, whose output
carries altair's own vega-lite mime type (for front ends that render it) and:

* in the notebooks the book's build executes (:data:`PAGE_ENV` set), an HTML snippet that
  draws the chart, interactive, with ``window.vegaEmbed``, which the built book gets from
  ``_static/vega-bundle.js``, and the chart as a PNG. :func:`write_bundle` writes that file at
  build time from the ``vl-convert-python`` package (vega, vega-lite and vega-embed in one
  script), wrapped in a function scope so that its top-level names cannot clash with the
  page's own scripts. The copy of each executed notebook the book serves for download
  (:func:`serve`) keeps the PNG and drops the snippet, which JupyterLab would prefer to the
  PNG and then show empty (it strips the script of a notebook it does not trust);
* everywhere else (JupyterLab, VS Code, Colab, a notebook viewer), the chart drawn by
  vl-convert as SVG and PNG (:func:`static_images`), which every front end shows, with no
  script and no internet; a saved notebook shows its PNG even when it is not trusted.

The bundle is never committed: it is produced from the installed package on every build.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from ..runtime.cache import atomic_write

BUNDLE_NAME = "vega-bundle.js"
#: the book's own style sheet for charts and output tables (:func:`write_styles`)
STYLES_NAME = "analysis-lib.css"
#: a chart never runs past its column: drawn at its own size, scaled down to fit (vega's
#: SVG keeps its viewBox, so tooltips and controls still line up); a wide output table
#: scrolls inside its column instead of running past it; inline code and links (long
#: paths) wrap rather than widen a page on a phone; the front page's answer
#: (:func:`analysis_lib.book.findings.answer`): a tally bar and one wrapping row per claim
STYLES = """.analysis-lib-chart { max-width: 100%; }
.analysis-lib-chart .vega-embed { max-width: 100%; }
.analysis-lib-chart svg.marks { max-width: 100%; height: auto; }
.cell_output .output.text_html { max-width: 100%; overflow-x: auto; }
article code.literal, article code.literal span.pre, article .sig, article .sig span.pre,
article a, .prev-next-area code.literal, .prev-next-area span.pre { white-space: pre-wrap;
  overflow-wrap: anywhere; }
.prev-next-area a { min-width: 0; max-width: 50%; }
.prev-next-area .prev-next-info, .prev-next-area p.prev-next-title { min-width: 0;
  overflow-wrap: anywhere; }
article mjx-container[display="true"] { display: block; max-width: 100%; overflow-x: auto;
  overflow-y: hidden; }
.analysis-lib-answer .al-tally { display: flex; height: 0.9rem; border-radius: 3px;
  overflow: hidden; margin: 0.4rem 0; }
.analysis-lib-answer .al-words { margin: 0.2rem 0 0.6rem; }
.analysis-lib-answer .al-key { white-space: nowrap; }
.analysis-lib-answer .al-key::before { content: ""; display: inline-block; width: 0.7em;
  height: 0.7em; border-radius: 50%; background: var(--al-colour); margin-right: 0.3em; }
.analysis-lib-answer .al-paper { margin: 0.8rem 0 0.2rem; }
.analysis-lib-answer ul.al-claims { list-style: none; padding-left: 0; margin: 0; }
.analysis-lib-answer ul.al-claims li { margin: 0.1rem 0; }
.analysis-lib-answer .al-row { display: flex; gap: 0.6em; align-items: baseline;
  text-decoration: none; color: inherit; }
.analysis-lib-answer .al-verdict { flex: 0 0 7.8em; font-size: 0.8em; font-weight: 600;
  text-align: center; border-radius: 3px; padding: 0 0.3em; color: var(--al-ink);
  background: var(--al-colour); white-space: nowrap; overflow-wrap: normal; }
.analysis-lib-answer .al-text { flex: 1 1 auto; min-width: 0; overflow-wrap: anywhere; }
"""
RENDERER = "book"
#: set in the environment of the notebooks the book's build executes: their charts are drawn
#: by the page's vega bundle, so no static image is made
PAGE_ENV = "ANALYSIS_LIB_BOOK_PAGE"

_HTML = """<div class="analysis-lib-chart" id="{id}"></div>
<script type="text/javascript">
(function () {{
  var spec = {spec};
  var tries = 0;
  function draw() {{
    var el = document.getElementById("{id}");
    if (!el) return;
    if (typeof window.vegaEmbed !== "function") {{
      if (++tries > 400) {{
        el.textContent = "This chart needs {bundle}, which did not load.";
        return;
      }}
      window.setTimeout(draw, 25);
      return;
    }}
    window.vegaEmbed(el, spec, {{"actions": false, "renderer": "svg"}}).catch(function (err) {{
      el.textContent = "Chart error: " + err;
    }});
  }}
  draw();
}})();
</script>"""


#: the spec inside a chart snippet (one line of JSON)
_SPEC = re.compile(r"^  var spec = (.*);$", re.M)


def chart_html(spec: dict[str, Any]) -> str:
    """The HTML snippet that draws ``spec`` (a vega-lite dict) with ``window.vegaEmbed``."""
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    chart_id = "chart-" + hashlib.sha256(text.encode()).hexdigest()[:16]
    safe = text.replace("</", "<\\/")  # a spec string must not close the script tag
    return _HTML.format(id=chart_id, spec=safe, bundle=BUNDLE_NAME)


def _vegalite_version() -> str:
    """The vega-lite version (``"6.1"``) vl-convert should use for altair's charts: altair's
    own where vl-convert has it, else vl-convert's newest."""
    import altair as alt
    import vl_convert as vlc

    major_minor = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    versions = vlc.get_vegalite_versions()
    return major_minor if major_minor in versions else versions[-1]


def static_images(spec: dict[str, Any]) -> dict[str, str]:
    """The chart ``spec`` (a vega-lite dict with its data inline) drawn by vl-convert:
    ``{"image/svg+xml": svg text, "image/png": base64 text}``, a notebook output that any
    front end shows."""
    import vl_convert as vlc

    return {"image/svg+xml": vlc.vegalite_to_svg(spec, vl_version=_vegalite_version()),
            "image/png": png_image(spec)}


def _renderer(spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    import altair as alt

    mime = f"application/vnd.vegalite.{alt.SCHEMA_VERSION.split('.')[0]}+json"
    if os.environ.get(PAGE_ENV):
        return {mime: spec, "text/html": chart_html(spec), "image/png": png_image(spec)}
    return {mime: spec, **static_images(spec)}


def png_image(spec: dict[str, Any]) -> str:
    """The chart ``spec`` drawn by vl-convert as a PNG, base64 text (a notebook output that
    every front end shows, trusted or not)."""
    import vl_convert as vlc

    png = vlc.vegalite_to_png(spec, vl_version=_vegalite_version())
    return base64.b64encode(png).decode("ascii")


def _chart_snippet(data: dict[str, Any]) -> str | None:
    """The book's chart snippet (:func:`chart_html`) in an output's HTML, or None."""
    html = data.get("text/html")
    html = "".join(html) if isinstance(html, list) else html
    return html if isinstance(html, str) and 'class="analysis-lib-chart"' in html else None


def serve(path: str | Path) -> int:
    """Rewrite the executed notebook at ``path`` as the book serves it for download: every
    output that draws a chart with the book's script (a chart, or the saved state of a
    widget) keeps its vega-lite spec and its PNG (drawn now where the run made none) and
    loses the script, so that JupyterLab, VS Code or a notebook viewer draws the chart. A
    widget's own view is dropped with it: away from the kernel that made it, the PNG of its
    saved state is what it can show. Returns the number of outputs rewritten (0 the second
    time: the rewrite is idempotent)."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    changed = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            data = output.get("data", {})
            html = _chart_snippet(data)
            if html is None:
                continue
            specs = [v for k, v in data.items() if k.startswith("application/vnd.vegalite")]
            if not specs:  # a widget's saved state: the spec is in the snippet
                found = _SPEC.search(html)
                specs = [json.loads(found.group(1))] if found else []
                caption = re.sub(r"<script.*?</script>|<[^>]+>", " ", html, flags=re.S)
                data["text/plain"] = " ".join(caption.split())
            if "image/png" not in data and specs:
                data["image/png"] = png_image(specs[0])
            for mime in ("text/html", "application/vnd.jupyter.widget-view+json"):
                data.pop(mime, None)
            changed += 1
    if changed:
        atomic_write(Path(path), lambda tmp: nbformat.write(nb, str(tmp)))
    return changed


def enable() -> None:
    """Register and switch on the ``book`` renderer (idempotent). Also lifts altair's
    5,000-row limit, since every chart's data lives in the page."""
    import altair as alt

    if RENDERER not in alt.renderers.names():
        alt.renderers.register(RENDERER, _renderer)
    alt.renderers.enable(RENDERER)
    alt.data_transformers.disable_max_rows()


def write_bundle(folder: str | Path) -> Path:
    """Write ``vega-bundle.js`` into ``folder`` from the installed vl-convert package, for the
    vega-lite version altair uses, wrapped in a function scope. Rewritten only when changed."""
    import vl_convert as vlc

    version = _vegalite_version()
    # the snippet is optional (the default puts the libraries on ``window``); the package's
    # type stub marks it required
    code = vlc.javascript_bundle(vl_version=version)  # type: ignore[call-arg]
    text = f"/* vega, vega-lite {version} and vega-embed, from vl-convert-python */\n" \
           f"(function () {{\n{code}\n}})();\n"
    path = Path(folder) / BUNDLE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return path


def write_styles(folder: str | Path) -> Path:
    """Write the book's chart and table styles (:data:`STYLES`) into ``folder``, where
    Jupyter Book loads every style sheet of ``_static`` on every page."""
    path = Path(folder) / STYLES_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text(encoding="utf-8") != STYLES:
        path.write_text(STYLES, encoding="utf-8")
    return path
