"""A small Sphinx extension for the book's build (listed in ``_config.yml``).

- ``api-module``: the API reference of one module of the library (``book/api/*.md``): its
  docstring, a summary table (autosummary) of its public names and each of them documented
  from its NumPy-style docstring (autodoc and napoleon). The public names are
  :func:`public_names`, so a page never drifts from the code.
- The library's version is the book's ``version``/``release`` and the MyST substitution
  ``{{ version }}``.
- Each page's scripts are listed once: sphinx-thebe declares its configuration (``const
  THEBE_JS_URL = ...``) in an inline script that can be added twice, and the second copy
  stops with a redeclaration error in the browser's console.
- A fresh browser (no light/dark choice stored yet) starts in the theme's ``auto`` mode
  instead of an empty one, which the theme reports as an error before falling back.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from functools import lru_cache
from types import ModuleType
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

from .. import __version__

#: the modules the API reference documents, by page (``book/api/<page>.md``)
API_PAGES: dict[str, tuple[str, ...]] = {
    "similarity": ("analysis_lib.similarity", "analysis_lib.similarity.reference",
                   "analysis_lib.similarity.structure", "analysis_lib.similarity.curves"),
    "alignment": ("analysis_lib.alignment", "analysis_lib.alignment.pairs",
                  "analysis_lib.alignment.flows"),
    "extraction": ("analysis_lib.extract", "analysis_lib.collect", "analysis_lib.collection",
                   "analysis_lib.layers",
                   "analysis_lib.data.corpora",
                   "analysis_lib.data.tasks", "analysis_lib.data.stimuli",
                   "analysis_lib.data.labels",
                   "analysis_lib.data.synthetic"),
    "models": ("analysis_lib.families", "analysis_lib.models.loading", "analysis_lib.models.info",
               "analysis_lib.models.packaged", "analysis_lib.models.random_init",
               "analysis_lib.models.batching", "analysis_lib.models.zoo",
               "analysis_lib.models.zoo_store"),
    "training": ("analysis_lib.training.loop", "analysis_lib.training.finetune",
                 "analysis_lib.training.grid", "analysis_lib.training.plateau",
                 "analysis_lib.training.learning", "analysis_lib.training.freezing",
                 "analysis_lib.training.heads", "analysis_lib.training.probes",
                 "analysis_lib.training.surgery", "analysis_lib.training.pretrain",
                 "analysis_lib.training.zoo", "analysis_lib.readout"),
    "claims": ("analysis_lib.claims", "analysis_lib.claims.claim", "analysis_lib.claims.verdicts",
               "analysis_lib.claims.tables", "analysis_lib.claims.causes",
               "analysis_lib.claims.training_gate"),
    "sweep": ("analysis_lib.sweep",),
    "charts": ("analysis_lib.book.plots",),
    "runtime": ("analysis_lib.runtime.device", "analysis_lib.runtime.cache",
                "analysis_lib.runtime.threads", "analysis_lib.runtime.profile",
                "analysis_lib.errors"),
}


def public_names(module: ModuleType) -> list[str]:
    """The public API of ``module``: its ``__all__`` when it declares one (submodules left
    out: each has its own entry), else, in the order of the source, the functions and classes
    defined in it, its constants (upper-case names assigned in it) and its names documented
    with a ``#:`` comment, whose names do not start with ``_``."""
    declared = getattr(module, "__all__", None)
    if declared is not None:
        return [n for n in declared if not inspect.ismodule(getattr(module, n))]
    found = [(_line(obj), name) for name, obj in vars(module).items()
             if not name.startswith("_") and _defined_in(obj, module)]
    found += [(line, name) for name, line in _assigned(module.__name__).items()
              if not name.startswith("_") and hasattr(module, name)
              and (name.isupper() or name in _constant_docs(module.__name__))
              and not inspect.ismodule(getattr(module, name))]
    return [name for _, name in sorted(set(found))]


def _defined_in(obj: Any, module: ModuleType) -> bool:
    target = inspect.unwrap(obj) if callable(obj) else obj
    return ((inspect.isfunction(target) or inspect.isclass(target))
            and getattr(target, "__module__", None) == module.__name__)


def _line(obj: Any) -> int:
    try:
        return inspect.getsourcelines(inspect.unwrap(obj))[1]
    except (OSError, TypeError):
        return 0


def _assigned(modname: str) -> dict[str, int]:
    """The names assigned at the top level of ``modname``'s source, with their lines."""
    import ast

    spec = importlib.util.find_spec(modname)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return {}
    with open(spec.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found: dict[str, int] = {}
    for statement in tree.body:
        targets = (statement.targets if isinstance(statement, ast.Assign) else
                   [statement.target] if isinstance(statement, ast.AnnAssign) else [])
        for target in targets:
            if isinstance(target, ast.Name):
                found.setdefault(target.id, statement.lineno)
    return found


def _constant_docs(modname: str) -> dict[str, list[str]]:
    """The module-level names of ``modname`` documented with ``#:`` comments, with the
    comment's lines."""
    from sphinx.pycode import ModuleAnalyzer, PycodeError

    try:
        docs = ModuleAnalyzer.for_module(modname).find_attr_docs()
    except PycodeError:
        return {}
    return {name: list(lines) for (scope, name), lines in docs.items() if scope == ""}


def _data_doc(module: ModuleType, name: str) -> list[str]:
    """The ``#:`` comment of a constant, read where it is defined: ``module`` or, for a
    package's re-exported name, one of its submodules."""
    places = [module.__name__] + sorted(m for m in list(sys.modules)
                                        if m.startswith(module.__name__ + "."))
    for place in places:
        doc = _constant_docs(place).get(name)
        if doc:
            return doc
    return []


def _entry(module: ModuleType, name: str) -> list[str]:
    """The directive that documents ``module.name``."""
    obj = getattr(module, name)
    full = f"{module.__name__}.{name}"
    if inspect.isclass(obj):
        return [f".. autoclass:: {full}", "   :members:", "   :undoc-members:",
                "   :show-inheritance:", ""]
    if callable(obj):
        return [f".. autofunction:: {full}", ""]
    doc = _data_doc(module, name)
    return [f".. py:data:: {name}", f"   :module: {module.__name__}", ""] + [
        f"   {line}" for line in doc] + [""]


class ApiModule(SphinxDirective):
    """``.. api-module:: analysis_lib.similarity``: the module's docstring, a table of its
    public names and every one of them documented."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        name = self.arguments[0]
        module = importlib.import_module(name)
        names = public_names(module)
        # the table lists what is called or built; constants are documented below it
        called = [n for n in names if callable(getattr(module, n))]
        lines = [f".. automodule:: {name}", "   :no-members:", "",
                 f".. currentmodule:: {name}", ""]
        if called:
            lines += [".. autosummary::", "   :nosignatures:", ""]
            lines += [f"   {n}" for n in called] + [""]
        for n in names:
            lines += _entry(module, n)
        holder = nodes.Element()
        self.state.nested_parse(StringList(lines, source=f"api-module {name}"),
                                self.content_offset, holder)
        return holder.children


@lru_cache(maxsize=1)
def documented() -> dict[Any, str]:
    """Where each object of the API reference is documented, keyed by its own full name
    (defining module and qualified name; for a constant, its identity and name) -> the name
    it is listed under: ``analysis_lib.models.load`` is documented as
    ``analysis_lib.models.loading.load``."""
    found: dict[Any, str] = {}
    for modules in API_PAGES.values():
        for modname in modules:
            module = importlib.import_module(modname)
            found.setdefault(modname, modname)
            for name in public_names(module):
                found.setdefault(_key(getattr(module, name), name), f"{modname}.{name}")
    return found


def _key(obj: Any, name: str) -> Any:
    """What identifies ``obj`` (reached by ``name``) across the names it is exported under."""
    if inspect.ismodule(obj):
        return obj.__name__
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str):
        return f"{module}.{qualname}"
    return (id(obj), name)


_MISSING = object()


def _lookup(dotted: str) -> Any:
    """The object a dotted name of the library names, or ``_MISSING``."""
    if not dotted.startswith("analysis_lib"):
        return _MISSING
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return _MISSING
        return obj
    return _MISSING


def _external(name: str) -> bool:
    """Whether ``name`` belongs to another project whose types a signature may show (no
    inventory of theirs is fetched offline): shown unlinked."""
    return name.split(".")[0] in ("numpy", "pandas", "scipy", "torch", "transformers")


def _missing_reference(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    """A reference to a library object by a name it is not listed under (the package that
    re-exports it, a name imported into the docstring's module, a module path relative to
    it) links to where the API reference documents it; one to an object that exists but is
    not part of the reference (a helper module) is shown unlinked. A name that exists nowhere
    stays unresolved, and the strict build reports it."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip(".~")
    # a name from an annotation left as written (``autodoc_type_aliases`` spells it in full)
    aliases = getattr(app.config, "autodoc_type_aliases", None) or {}
    if target in aliases:
        target = aliases[target]
        if _external(target):
            return contnode
    parents = (node.get("py:module") or "").split(".")
    candidates = [".".join(parents[:k] + [target]) for k in range(len(parents), 0, -1)]
    for candidate in [target] + candidates:
        obj = _lookup(candidate)
        if obj is _MISSING or (node["reftype"] == "mod") != inspect.ismodule(obj):
            continue
        listed = documented().get(_key(obj, candidate.rsplit(".", 1)[-1]))
        if listed is None:
            return contnode
        # by its own role, else by any (a type alias in a signature is documented as data)
        domain = env.get_domain("py")
        for role in (node["reftype"], "obj"):
            found = domain.resolve_xref(env, node["refdoc"], app.builder, role, listed, node,
                                        contnode)
            if found is not None:
                return found
        return None
    return None


def _config_inited(app, config) -> None:
    config.version = config.release = __version__
    substitutions = dict(getattr(config, "myst_substitutions", None) or {})
    substitutions.setdefault("version", __version__)
    config.myst_substitutions = substitutions


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


def setup(app: Any) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.autodoc")
    app.setup_extension("sphinx.ext.autosummary")
    app.setup_extension("sphinx.ext.napoleon")
    app.add_directive("api-module", ApiModule)
    app.connect("config-inited", _config_inited)
    app.connect("missing-reference", _missing_reference)
    app.connect("html-page-context", _page_context)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
