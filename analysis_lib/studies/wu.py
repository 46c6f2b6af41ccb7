"""Wu et al. 2020's claims, each beside the function that computes its evidence.

The fine-tuning chapter (:mod:`analysis_lib.studies.finetuning`) tests what fine-tuning
changes from its result ``change`` (:func:`~analysis_lib.studies.finetuning.change_frame`,
one row per model, task, seed and layer); the domains chapter
(:mod:`analysis_lib.studies.domains`) tests the two tasks' models against each other from
``cross``. Claims read from runs that failed the training gate get no verdict
(``untrained``: :func:`~analysis_lib.studies.shared.training_problems`).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from .claim import SIM, Evidence, Paper, figure
from .merchant import depth_drop

WU = Paper("Wu")


@WU.claim("wu-ft-top-change", "§6, Fig. 5-6",
    "fine-tuning changes the top layers more than the lower ones",
    "yes: similarity to the pretrained model drops in the top layers",
    "per measure: similarity of base and fine-tuned model at the first transformer "
    "layer minus at the top layer (linear CKA, neuronsim, head-level JS), mean over "
    "fine-tuning seeds", "greater", 0.02, SIM,
    control=("condition", "the first transformer layer of the same runs"),
    paper_effect=figure("Figs. 5-6"),
    chapter="finetuning", gates=("untrained",))
def ft_top_change(change: pd.DataFrame | None) -> list[Evidence]:
    """Per (model, task) and measure (linear CKA, neuronsim, attention JS, those
    ``change`` holds): similarity to the base model at the first transformer layer minus at
    the top, one value per seed."""
    return [unit for measure in ("linear_cka", "neuronsim", "attention_js")
            for unit in depth_drop(change, measure)]


@WU.claim("wu-localization-ft", "§6, Fig. 7",
    "fine-tuning makes the top layers less localized",
    "yes: lower localization at the top layers after fine-tuning",
    "per model and task: localization of the pretrained model's top layer minus that "
    "of the fine-tuned model's, over fine-tuning seeds",
    "greater", 0.02, SIM,
    control=("condition", "the pretrained model's own top layer, on the same words"),
    paper_effect=figure("Fig. 7"),
    chapter="finetuning", gates=("untrained",))
def localization_ft(change: pd.DataFrame | None) -> list[Evidence]:
    """Per (model, task): the pretrained model's localization at the top layer minus each
    fine-tuned seed's (Wu et al. Fig. 7), one value per seed."""
    if change is None or "localization_ft" not in change:
        return []
    out = []
    for (model, task), group in change.groupby(["model", "task"], sort=False):
        top = group[group.layer == group.layer.max()]
        out.append(Evidence.from_values(
            f"{model}, {task}, localization at L{int(top.layer.iloc[0])} (base - tuned)",
            top.localization_base - top.localization_ft))
    return out


@WU.claim("wu-cross-task", "§6, Fig. 5–6; Phang App. B, Fig. 7",
    "models fine-tuned on different tasks from one base stay alike in their bottom "
    "layers and diverge in their top layers",
    "yes: bottom layers similar across tasks, top layers not",
    "per model and pair of tasks: linear CKA between the two tasks' models (same seed, "
    "the same words of one task's stimuli) at the first transformer layer minus at "
    "the top layer, over seeds",
    "greater", 0.02, SIM,
    control=("condition", "the top layers of the same two models on the same words"),
    paper_effect=figure("Wu Figs. 5-6, Phang Fig. 7"),
    chapter="domains", gates=("untrained",))
def cross_task(cross: Mapping[tuple[str, str, str], pd.DataFrame] | None) -> list[Evidence]:
    """Per (model, stimuli's task, other task): the two tasks' models' CKA at the first
    transformer layer minus at the top one, one value per seed (``cross``:
    :func:`~analysis_lib.studies.domains.cross_task` per (model, task whose words, other
    task))."""
    out = []
    for (model, task, other), frame in (cross or {}).items():
        if not len(frame):
            continue
        top = int(frame.layer.max())
        wide = frame.pivot_table(index="seed", columns="layer", values="linear_cka")
        if 1 in wide and top > 1:
            out.append(Evidence.from_values(f"{model}, {task} and {other} models on {task}'s "
                                            f"words (L1 - L{top})", wide[1] - wide[top]))
    return out
