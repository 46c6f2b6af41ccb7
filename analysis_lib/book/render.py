"""Show altair charts in JupyterLab and in the built book, with no internet.

altair's default renderer loads the vega libraries from a CDN, which the offline book cannot
reach. :func:`enable` registers a renderer, ``"book"``, whose output carries two
representations of a chart:

* altair's own vega-lite mime type, which JupyterLab renders natively;
* an HTML snippet that draws the chart with ``window.vegaEmbed``, which the built book gets
  from ``_static/vega-bundle.js``. :func:`write_bundle` writes that file at build time from
  the ``vl-convert-python`` package (vega, vega-lite and vega-embed in one script), wrapped in a
  function scope so that its top-level names cannot clash with the page's own scripts.

The bundle is never committed: it is produced from the installed package on every build.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

BUNDLE_NAME = "vega-bundle.js"
RENDERER = "book"

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


def chart_html(spec: dict[str, Any]) -> str:
    """The HTML snippet that draws ``spec`` (a vega-lite dict) with ``window.vegaEmbed``."""
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    chart_id = "chart-" + hashlib.sha256(text.encode()).hexdigest()[:16]
    safe = text.replace("</", "<\\/")  # a spec string must not close the script tag
    return _HTML.format(id=chart_id, spec=safe, bundle=BUNDLE_NAME)


def _renderer(spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    import altair as alt

    mime = f"application/vnd.vegalite.{alt.SCHEMA_VERSION.split('.')[0]}+json"
    return {mime: spec, "text/html": chart_html(spec)}


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
    import altair as alt
    import vl_convert as vlc

    major_minor = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    versions = vlc.get_vegalite_versions()
    version = major_minor if major_minor in versions else versions[-1]
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
