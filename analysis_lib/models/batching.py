"""Token ids into model inputs: the padding id and right-padded batches."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def pad_token_id(tokenizer: PreTrainedTokenizerBase) -> int:
    """The tokenizer's padding id; 0 when it has none (GPT-2). Padded positions are masked
    out, so the id only has to be a valid one."""
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0


def pad_batch(ids: Sequence[Sequence[int]], rows: Sequence[int] | np.ndarray, pad_id: int
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask)``, both (len(rows), longest), for the sequences
    ``ids[r]`` of ``rows``, padded on the right."""
    width = max(len(ids[r]) for r in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for k, r in enumerate(rows):
        input_ids[k, : len(ids[r])] = torch.as_tensor(ids[r], dtype=torch.long)
        mask[k, : len(ids[r])] = 1
    return input_ids, mask
