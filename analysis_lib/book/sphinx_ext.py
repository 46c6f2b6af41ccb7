"""A small Sphinx extension for the book's build (listed in ``_config.yml``).

- Each page's scripts are listed once: sphinx-thebe declares its configuration (``const
  THEBE_JS_URL = ...``) in an inline script that can be added twice, and the second copy
  stops with a redeclaration error in the browser's console.
- A fresh browser (no light/dark choice stored yet) starts in the theme's ``auto`` mode
  instead of an empty one, which the theme reports as an error before falling back.
"""

from __future__ import annotations

from typing import Any


def _page_context(app, pagename: str, templatename: str, context: dict[str, Any],
                  doctree) -> None:
    if not context.get("default_mode"):
        context["default_mode"] = "auto"
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for script in scripts:
        # the same inline script can come once with filename None and once with ''
        attributes = getattr(script, "attributes", {}) or {}
        key = (str(getattr(script, "filename", script) or ""),
               tuple(sorted((k, str(v)) for k, v in attributes.items())))
        if key in seen:
            continue
        seen.add(key)
        kept.append(script)
    context["script_files"] = kept


def setup(app) -> dict[str, Any]:
    app.connect("html-page-context", _page_context)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
