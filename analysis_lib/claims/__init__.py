"""The claims this book tests and the one rule that judges them.

* ``claim``: the claim record (:class:`~analysis_lib.claims.claim.Claim`), its evidence
  and verdict words;
* ``verdicts``: the one verdict rule (:func:`~analysis_lib.claims.verdicts.decide`) with
  its reference twin, and :func:`~analysis_lib.claims.verdicts.judge` for a chapter's
  claims;
* ``tables``: a chapter's findings table, and the mean with its interval over seeds;
* ``causes``: whether a setting is the cause of a claim that does not show;
* ``training_gate``: the training adequacy a claim's evidence rests on;
* ``papers``: one module per paper (``papers.wu``, ``papers.phang``, ``papers.ren``,
  ``papers.merchant``), each claim beside the function that computes its evidence from a
  chapter's results.

The package reads results; it loads, trains and extracts nothing, and it imports without
PyTorch. Claim ids are written only in the papers' modules.

This module holds the registry: every claim by id (:data:`CLAIMS`, :func:`get`), a
chapter's claims (:func:`of_chapter`) and the results each reads.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from . import training_gate
from .claim import CHAPTERS, PAPERS, Claim
from .papers import merchant, phang, ren, wu

#: the papers' modules, each listing its claims beside their evidence functions
PAPER_MODULES = (wu, phang, merchant, ren)
_CLAIMS = [claim for module in PAPER_MODULES for claim in module.CLAIMS]
#: every claim the book tests, by id
CLAIMS: Mapping[str, Claim] = MappingProxyType({c.id: c for c in _CLAIMS})
if len(CLAIMS) != len(_CLAIMS):
    raise RuntimeError("two claims share an id")


def get(claim_id: str) -> Claim:
    """The claim with this id; an unknown id is an error that names the closest ones."""
    if claim_id in CLAIMS:
        return CLAIMS[claim_id]
    close = difflib.get_close_matches(str(claim_id), list(CLAIMS), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; ids: {', '.join(CLAIMS)}"
    raise KeyError(f"no claim {claim_id!r}{hint}")


def of_paper(paper: str) -> list[Claim]:
    """The claims of one paper (``"Wu"``, ``"Phang"``, ``"Merchant"``, ``"Ren"``)."""
    if paper not in PAPERS:
        raise ValueError(f"paper must be one of {sorted(PAPERS)}, got {paper!r}")
    return [c for c in CLAIMS.values() if c.paper == paper]


def of_chapter(chapter: str) -> list[Claim]:
    """The claims one chapter's results test (one of :data:`~.claim.CHAPTERS`), in the order
    of the papers' modules; pass them with the results to
    :func:`analysis_lib.claims.verdicts.judge`."""
    if chapter not in CHAPTERS:
        raise ValueError(f"chapter must be one of {CHAPTERS}, got {chapter!r}")
    return [c for c in CLAIMS.values() if c.chapter == chapter]


def answerable(claims: Iterable[Claim], results: Mapping[str, Any]) -> list[Claim]:
    """The claims among ``claims`` whose evidence reads only results that ``results`` holds:
    those that a partial run answers (another profile's runs read from the cache hold only
    some of a chapter's results). Pass them with the results to
    :func:`analysis_lib.claims.verdicts.judge`."""
    return [c for c in claims if set(evidence_reads(c)) <= set(results)]


def preconditions(claim: Claim, among: Iterable[Claim] = ()) -> list[Claim]:
    """The claims ``claim`` presupposes, nearest first: the one its
    :attr:`~analysis_lib.claims.claim.Claim.requires` names, the one that one requires, and
    so on down the chain. Ids are looked up among ``among`` (claims of one's own) first, then
    in :data:`CLAIMS`. A chain that comes back to a claim already in it, or that names a
    claim that exists nowhere, is a ``ValueError`` naming the whole chain: no verdict can
    rest on it."""
    known = {c.id: c for c in among}
    chain: list[Claim] = []
    seen = [claim.id]
    current = claim
    while current.requires:
        needed = current.requires
        if needed in seen:
            raise ValueError(f"claim {claim.id!r}: its preconditions form a cycle "
                             f"({' -> '.join([*seen, needed])}); a claim cannot presuppose "
                             "itself, directly or through others")
        if needed in known:
            current = known[needed]
        elif needed in CLAIMS:
            current = CLAIMS[needed]
        else:
            raise ValueError(f"claim {claim.id!r}: its precondition chain "
                             f"({' -> '.join([*seen, needed])}) names {needed!r}, which is "
                             "no claim; fix the id in requires=")
        chain.append(current)
        seen.append(current.id)
    return chain


def evidence_reads(claim: Claim, among: Iterable[Claim] = ()) -> tuple[str, ...]:
    """The results a claim's evidence reads, with those of every claim it presupposes
    (:func:`preconditions`)."""
    chain = [claim, *preconditions(claim, among)]
    return tuple(dict.fromkeys(name for c in chain for name in c.reads))


def results_read(claim: Claim, among: Iterable[Claim] = ()) -> tuple[str, ...]:
    """Every result a claim's verdict reads: :func:`evidence_reads`, the gates of the
    claim and of every claim it presupposes, and the grid's adequacy lines
    (:data:`~analysis_lib.claims.training_gate.ADEQUACY`) where one of them reads the
    fine-tuning grid (:data:`~analysis_lib.claims.training_gate.GRID`)."""
    chain = [claim, *preconditions(claim, among)]
    gates = [name for c in chain for name in c.gates]
    adequacy = (training_gate.ADEQUACY,) if training_gate.GRID in gates else ()
    return tuple(dict.fromkeys((*evidence_reads(claim, among), *gates, *adequacy)))


for _claim in _CLAIMS:  # every chain of the book's claims resolves (a cycle or a gap fails)
    preconditions(_claim)
