"""Errors shared by the library."""

from __future__ import annotations


class OfflineError(ValueError):
    """A model or corpus must be downloaded from a hub, and this machine cannot reach it.

    The message names the resource and the ways to get it: go online once (the download is
    then cached by Hugging Face), pre-download it on another machine into the Hugging Face
    cache, or pass a local path.
    """


class UndefinedMeasure(ValueError):
    """A measure is not defined for its input: a layer without variance (every neuron
    constant, or every row the same) or a constant similarity matrix. A ValueError; resampling
    loops catch this one case by name (a resample that drew copies of one stimulus only),
    and let every other error through."""


def offline_message(kind: str, name: str, error: BaseException | None = None) -> str:
    """The text of an :class:`OfflineError` for a ``kind`` ('model', 'corpus') named ``name``."""
    reason = f" ({type(error).__name__}: {str(error).splitlines()[0][:200]})" if error else ""
    return (
        f"the {kind} {name!r} is not available offline and could not be downloaded{reason}. "
        "To use it: run once with internet access (it is then cached by Hugging Face), or "
        "download it elsewhere and copy the Hugging Face cache (HF_HOME) here, or pass the path "
        f"of a local folder that holds it. The {kind}s that always work offline are listed "
        f"by python -m analysis_lib {'models' if kind == 'model' else 'corpora'}."
    )
