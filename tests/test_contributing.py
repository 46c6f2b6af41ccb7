"""The running page's "Adding a claim, a measure or a chapter" is true: a toy measure and a
toy claim, written into a copy of the library in exactly the places the page names, are
computed, checked and judged by the library's existing machinery, with no other edit."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "analysis_lib"
RUNNING = ROOT / "book" / "running.md"

#: the places the running page names, as paths inside the library
MEASURE_PLACES = ("similarity/registry.py", "similarity/kernels.py", "similarity/reference.py")
CLAIM_PLACE = "claims/papers/wu.py"

REFERENCE = '''

def toy(X: np.ndarray, Y: np.ndarray) -> float:
    """Pearson correlation of the stimuli's squared distances from their layer's mean."""
    nx, ny = (centred(X) ** 2).sum(axis=1), (centred(Y) ** 2).sum(axis=1)
    return float(np.corrcoef(nx, ny)[0, 1])
'''

KERNEL = '''

def toy_pair(a, b, pair, options, directions):
    # row_gram: the centred rows' products, float64 on the host whatever the backend
    value = float(np.corrcoef(np.diagonal(a.row_gram), np.diagonal(b.row_gram))[0, 1])
    return value, value
'''

RECORD = '''    Measure("toy", True, "activations", k.toy_pair, ref.toy, dict(_WORK), _ROTATION),
'''

CLAIM = '''

@WU.claim("wu-toy", "nowhere", "a toy claim: its gaps are positive", "yes",
          "the mean of the toy gaps over units", "greater", 0.1,
          "a gap under 0.1 is too small to read", control=("baseline", "a gap of zero"),
          paper_effect="none: a toy", chapter="representation")
def toy_claim(toy_gaps: Mapping[str, Sequence[float]] | None) -> list[Evidence]:
    """One unit per key of ``toy_gaps``: the mean of its values."""
    return [Evidence.from_values(unit, values) for unit, values in (toy_gaps or {}).items()]
'''

SCRIPT = textwrap.dedent('''
    import numpy as np
    from analysis_lib import claims, similarity
    from analysis_lib.claims import verdicts
    from analysis_lib.similarity import reference
    from analysis_lib.similarity.registry import invariant_to

    rng = np.random.default_rng(0)
    base = rng.standard_normal((200, 12))
    layers = [base @ rng.standard_normal((12, d)) + 0.3 * rng.standard_normal((200, d))
              for d in (12, 20, 8)]
    M = similarity.pairwise(layers, measure="toy", backend="numpy")
    want = np.array([[reference.toy(X, Y) for Y in layers] for X in layers])
    assert np.allclose(M, want, atol=1e-10), (M, want)
    assert np.allclose(similarity.pairwise(layers, measure="toy", backend="torch"), want,
                       atol=1e-5)
    Q, _ = np.linalg.qr(rng.standard_normal((20, 20)))
    moved = 3.0 * layers[1] @ Q + 5.0
    assert invariant_to("toy", "orthogonal") and invariant_to("toy", "translation")
    assert abs(similarity.pairwise([layers[0], moved], measure="toy", backend="numpy")[0, 1]
               - want[0, 1]) < 1e-10
    try:
        similarity.pairwise(layers, measure="toy", top_k=3)
    except (TypeError, ValueError) as error:
        assert "top_k" in str(error)
    else:
        raise AssertionError("an option the toy measure does not take was accepted")

    claim = claims.get("wu-toy")
    assert claim in claims.of_chapter("representation") and claim.reads == ("toy_gaps",)
    for sign, outcome in ((1, "holds"), (-1, "opposite")):
        gaps = {f"unit {k}": sign * (0.5 + 0.05 * rng.standard_normal(8)) for k in range(3)}
        results = {"toy_gaps": gaps}
        table = verdicts.judge(claims.answerable(claims.of_chapter("representation"),
                                                 results), results)
        assert list(table.index) == ["wu-toy"], table
        assert table.loc["wu-toy", "verdict"] == outcome, table
    print("ok")
''')


def _add(path: Path, text: str, before: str | None = None) -> None:
    source = path.read_text(encoding="utf-8")
    if before is None:
        path.write_text(source + text, encoding="utf-8")
        return
    assert source.count(before) == 1, f"{path.name}: {before!r} not found once"
    path.write_text(source.replace(before, text + before), encoding="utf-8")


def test_the_page_names_the_places_the_toy_uses():
    page = RUNNING.read_text(encoding="utf-8")
    section = page.split("## Adding a claim, a measure or a chapter", 1)[1].split("\n## ", 1)[0]
    for place in (*MEASURE_PLACES, CLAIM_PLACE.replace("wu.py", "<paper>.py")):
        assert place.split("/")[-1] in section, place
    assert "MEASURE_TABLE" in section and "verdicts.judge(claims.of_chapter" in section
    assert re.search(r"`_toc\.yml`", section) and "CHAPTERS" in section


def test_a_toy_measure_and_a_toy_claim_in_the_named_places_work(tmp_path):
    copy = tmp_path / "analysis_lib"
    shutil.copytree(LIBRARY, copy, ignore=shutil.ignore_patterns("__pycache__"))
    _add(copy / "similarity" / "reference.py", REFERENCE)
    _add(copy / "similarity" / "kernels.py", KERNEL)
    _add(copy / "similarity" / "registry.py", RECORD, before=")\nREGISTRY: dict")
    _add(copy / CLAIM_PLACE, CLAIM, before="\n\n#: the paper's claims")
    env = {**os.environ, "PYTHONPATH": str(tmp_path),
           "ANALYSIS_LIB_CACHE": str(tmp_path / "cache")}
    ran = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         cwd=tmp_path, env=env)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.strip().endswith("ok")
