"""What an executed notebook shows, for the tests that read one: its outputs of one kind and
the text its cells printed."""

from __future__ import annotations


def outputs(nb, mime: str) -> list:
    """The outputs of ``nb``'s code cells in the MIME type ``mime``, in order."""
    return [o["data"][mime] for c in nb.cells if c.cell_type == "code"
            for o in c.get("outputs", []) if mime in o.get("data", {})]


def printed_text(nb) -> str:
    """Everything ``nb``'s code cells printed (their stream outputs), joined."""
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.get("outputs", []))
