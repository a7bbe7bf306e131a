"""The vine's replay of labelled decisions, in preallocated arrays.

Each labelled decision (its observation, action mask, the rollout policy's label and whether
that label differs from the guide's) is written into ring arrays once; a distillation step
gathers a minibatch by index. Stacking the whole replay from per-decision dicts at every update
(a list of up to ``capacity`` observations of ~12 KB each) cost more than the update itself.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np


class LabelReplay:
    """A ring buffer of labelled decisions; the oldest are overwritten once it is full.

    Args:
        capacity: decisions kept.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"replay capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._obs: dict[str, np.ndarray] = {}
        self._masks: np.ndarray | None = None
        self._labels = np.zeros(capacity, dtype=np.int64)
        self._not_guide = np.zeros(capacity, dtype=np.float32)
        self._next = 0
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def append(
        self, obs: Mapping[str, np.ndarray], mask: np.ndarray, label: int, not_guide: bool
    ) -> None:
        """Add one decision (arrays are copied in)."""
        if self._masks is None:
            self._obs = {
                k: np.zeros((self.capacity, *np.shape(v)), dtype=np.asarray(v).dtype)
                for k, v in obs.items()
            }
            self._masks = np.zeros((self.capacity, len(mask)), dtype=bool)
        i = self._next
        for k, v in obs.items():
            self._obs[k][i] = v
        self._masks[i] = mask
        self._labels[i] = label
        self._not_guide[i] = float(not_guide)
        self._next = (i + 1) % self.capacity
        self._size = min(self._size + 1, self.capacity)

    def batch(self, idx: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """(observations, masks, labels) of the decisions at positions ``idx`` (< ``len``)."""
        assert self._masks is not None
        return {k: v[idx] for k, v in self._obs.items()}, self._masks[idx], self._labels[idx]

    def share_not_guide(self) -> float:
        """Share of the kept labels that differ from the guide's action."""
        return float(self._not_guide[: self._size].mean()) if self._size else 0.0
