"""A policy network that scores every (job, Cell) row with shared weights.

The default SB3 head maps a flat observation to one logit per action slot, so slot i's weights
are tied to whatever job happens to sit in slot i.  :class:`RowScorerPolicy` instead encodes each
window job and each candidate Cell with the same small networks and scores the pair, so the
policy is permutation-equivariant over the window and over the Cells (RLScheduler's "kernel"
network, Zhang et al., SC'20): reordering jobs reorders their logits.  WAIT and the
value come from a context that pools over jobs and GPU types.

The table layout (K, C, G, R) is recovered from the observation space, so the policy needs no
extra arguments and works with any :class:`~crius_gym.env.config.EnvConfig`.

**A residual on top of the guide.** With ``hint_weight`` > 0 every action's logit gets
``hint_weight`` × the env's "the guide's next action" indicator (its ``guide_next``,
``guide_preempts`` and ``guide_wait`` columns), a learnable scalar; with ``zero_init`` the last
layer of every scorer starts at zero. The untrained policy then takes the guide's action with
probability e^w / (e^w + valid actions − 1) and its most likely action *is* the guide's, so PPO
starts from the heuristic and learns a residual (Residual Policy Learning, Silver et al.
2018, arXiv 1812.06298).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from crius_gym.env.features import (
    CELL_FEATURES_BASE,
    CELL_GUIDE_NEXT,
    CELL_GUIDE_PLAN,
    GLOBAL_FEATURES,
    GLOBAL_GUIDE_PLAN_LEFT,
    GLOBAL_GUIDE_WAIT,
    JOB_FEATURES,
    JOB_GUIDE_ACTS,
    JOB_GUIDE_PREEMPTS,
    TYPE_FEATURES,
)

# The "present" flag of a padded table row, found by name.
_JOB_PRESENT = JOB_FEATURES.index("present")
_CELL_IS_CURRENT = CELL_FEATURES_BASE.index("is_current")
_TYPE_PRESENT = TYPE_FEATURES.index("present")

TABLE_KEYS = ("jobs", "cells", "running", "running_cells", "cluster", "globals")

#: The guide's columns of each table (its plan and its next action), by table key.
_GUIDE_COLUMNS = {
    "jobs": (JOB_GUIDE_ACTS, JOB_GUIDE_PREEMPTS),
    "running": (JOB_GUIDE_ACTS, JOB_GUIDE_PREEMPTS),
    "cells": (CELL_GUIDE_NEXT, CELL_GUIDE_PLAN),
    "running_cells": (CELL_GUIDE_NEXT, CELL_GUIDE_PLAN),
    "globals": (GLOBAL_GUIDE_WAIT, GLOBAL_GUIDE_PLAN_LEFT),
}


@dataclass(frozen=True)
class TableLayout:
    """Sizes of the observation tables.

    Attributes:
        jobs: K.
        cells: C.
        types: G.
        running: R (0 without the running-job block).
        cell_features: features per Cell row.
        offsets: (start, end) of each key in the flat feature vector.
    """

    jobs: int
    cells: int
    types: int
    running: int
    cell_features: int
    offsets: dict[str, tuple[int, int]]

    @property
    def num_actions(self) -> int:
        """K·C + R·(C+1) + 1."""
        return self.jobs * self.cells + self.running * (self.cells + 1) + 1

    def guide_free_mask(self) -> torch.Tensor:
        """(features,) ones, with zeros at the guide's columns of every table row."""
        jobs, cells = len(JOB_FEATURES), self.cell_features
        width = {"jobs": jobs, "running": jobs, "cells": cells, "running_cells": cells}
        width["globals"] = len(GLOBAL_FEATURES)
        mask = torch.ones(max(e for _, e in self.offsets.values()))
        for key, cols in _GUIDE_COLUMNS.items():
            if key in self.offsets:
                start, end = self.offsets[key]
                for col in cols:
                    mask[start + col : end : width[key]] = 0.0
        return mask

    @classmethod
    def from_space(cls, space: spaces.Dict) -> TableLayout:
        """Infer the layout from the env's observation space."""
        size = {k: int(np.prod(space[k].shape or (0,))) for k in TABLE_KEYS if k in space.spaces}
        g = size["cluster"] // len(TYPE_FEATURES)
        n_cell = len(CELL_FEATURES_BASE) + g
        k = size["jobs"] // len(JOB_FEATURES)
        c = size["cells"] // (k * n_cell)
        r = size.get("running", 0) // len(JOB_FEATURES)
        offsets, start = {}, 0
        for key in TABLE_KEYS:
            if key in size:
                offsets[key] = (start, start + size[key])
                start += size[key]
        return cls(jobs=k, cells=c, types=g, running=r, cell_features=n_cell, offsets=offsets)


class TableExtractor(BaseFeaturesExtractor):
    """Concatenates the table keys in a fixed order (the action mask is left out)."""

    def __init__(self, observation_space: spaces.Dict) -> None:
        layout = TableLayout.from_space(observation_space)
        super().__init__(observation_space, features_dim=max(e for _, e in layout.offsets.values()))
        self.layout = layout

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        """Flat features (batch, features_dim)."""
        return torch.cat([observations[k].float() for k in TABLE_KEYS if k in observations], 1)


def _mlp(sizes: list[int], final_activation: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(a, b))
        if final_activation or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _factored(
    scorer: nn.Sequential,
    rows: torch.Tensor,
    emb: torch.Tensor,
    ctx: torch.Tensor,
    extra: torch.Tensor | None = None,
) -> torch.Tensor:
    """``scorer`` on [rows, emb, ctx] (emb per job, ctx per sample, broadcast), without the concat.

    The first layer is linear, so W·[r, e, c] + b = W_r·r + (W_e·e + W_c·c + b): the job and
    context parts are computed once per job and per sample instead of once per (job, Cell)
    row (the concatenated input was most of the network's work, forward and backward).

    Args:
        scorer: an MLP whose first layer takes rows' features, then ``emb``'s, then ``ctx``'s.
        rows: (batch, jobs, C, F) Cell rows.
        emb: (batch, jobs, h) job embeddings.
        ctx: (batch, h) context.
        extra: (batch, jobs, C, h) added to the first layer's output (None: nothing).

    Returns:
        (batch, jobs, C) scores.
    """
    first = scorer[0]
    assert isinstance(first, nn.Linear)
    f, h = rows.shape[-1], emb.shape[-1]
    w = first.weight
    shared = nn.functional.linear(emb, w[:, f : f + h]) + nn.functional.linear(
        ctx, w[:, f + h :], first.bias
    ).unsqueeze(1)
    pre = nn.functional.linear(rows, w[:, :f]) + shared.unsqueeze(2)
    if extra is not None:
        pre = pre + extra
    out: torch.Tensor = scorer[1:](pre).squeeze(-1)
    return out


def _masked_mean(x: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
    """Mean over rows (dim 1) of the present rows; zeros when none."""
    w = present.unsqueeze(-1)
    return (x * w).sum(1) / w.sum(1).clamp(min=1.0)


class RowScorer(nn.Module):
    """Scores actions from tables; used as SB3's ``mlp_extractor``.

    Its actor output is already one logit per action (so the policy's ``action_net`` is the
    identity); its critic output is a pooled context of width ``hidden``.

    Args:
        layout: the observation tables.
        hidden: width of every hidden layer.
        hint_weight: initial weight of the guide's proposal in the logits (0: no such term).
        zero_init: start the scorers' last layers at zero (the logits are then the hint only).
        guide_inputs: the scorers and the value see the guide's columns (its plan and next
            action). False: they see every other feature and the guide enters the logits only
            through the hint, so the residual cannot cancel the hint with one weight on
            ``guide_next``; it has to say from the state's other features where another action
            is better (it can still lean against the hint through features that correlate
            with the guide's choice; docs/rl.md §3).
        relative_cells: a running job's Cells are scored on their features and on their
            difference from the job's current Cell (a move is a comparison: the time it saves,
            the GPUs it takes), not on their own features alone.
        queue_context: the context every scorer sees pools the window jobs' embeddings (what
            waits), not only the GPU types and the globals.

    Both options add a linear term to an existing layer's input (``run_rel``, ``ctx_queue``),
    so a network without them loads into one with them (``load_state_dict(strict=False)``)
    and, with those terms at zero (:meth:`zero_added_terms`), computes what it did.
    """

    _residual_mask: torch.Tensor  # a buffer: ones but at the guide's columns

    def __init__(
        self,
        layout: TableLayout,
        hidden: int = 128,
        hint_weight: float = 0.0,
        zero_init: bool = False,
        guide_inputs: bool = True,
        relative_cells: bool = False,
        queue_context: bool = False,
    ) -> None:
        super().__init__()
        self.layout = layout
        self.relative_cells = relative_cells
        self.queue_context = queue_context
        self.latent_dim_pi = layout.num_actions
        self.latent_dim_vf = hidden
        h = hidden
        self.type_enc = _mlp([len(TYPE_FEATURES), h])
        self.ctx = _mlp([h + len(GLOBAL_FEATURES), h, h])
        self.ctx_queue = nn.Linear(h, h, bias=False) if queue_context else None
        self.job_enc = _mlp([len(JOB_FEATURES), h, h])
        self.cell_score = _mlp([layout.cell_features + 2 * h, h, 1], final_activation=False)
        self.wait_score = _mlp([2 * h, h, 1], final_activation=False)
        self.run_rel: nn.Linear | None = None
        if layout.running:
            self.run_enc = _mlp([len(JOB_FEATURES), h, h])
            self.run_cell_score = _mlp([layout.cell_features + 2 * h, h, 1], final_activation=False)
            self.run_rel = (
                nn.Linear(layout.cell_features, h, bias=False) if relative_cells else None
            )
            self.preempt_score = _mlp([2 * h, h, 1], final_activation=False)
        self.value = _mlp([3 * h, h])
        self.hint = nn.Parameter(torch.tensor(float(hint_weight))) if hint_weight else None
        self.zero_init = zero_init
        self.guide_inputs = guide_inputs
        # Not in the state dict: a function of the layout, and old saved models have none.
        self.register_buffer("_residual_mask", layout.guide_free_mask(), persistent=False)
        if zero_init:
            self.zero_last_layers()

    def zero_added_terms(self) -> None:
        """Zero the options' added terms: the network computes what it did without them."""
        for term in (self.run_rel, self.ctx_queue):
            if term is not None:
                nn.init.zeros_(term.weight)

    def zero_last_layers(self) -> None:
        """Zero the last layer of every scorer (call again after any re-initialisation)."""
        running = (self.run_cell_score, self.preempt_score) if self.layout.running else ()
        for scorer in (self.cell_score, self.wait_score, *running):
            last = scorer[-1]
            assert isinstance(last, nn.Linear)
            nn.init.zeros_(last.weight)
            nn.init.zeros_(last.bias)

    def _table(self, x: torch.Tensor, key: str, rows: int) -> torch.Tensor:
        a, b = self.layout.offsets[key]
        return x[:, a:b].reshape(x.shape[0], rows, (b - a) // rows)

    def _encode(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        lay = self.layout
        types = self._table(x, "cluster", lay.types)
        gl = self._table(x, "globals", 1)[:, 0]
        type_ctx = _masked_mean(self.type_enc(types), types[..., _TYPE_PRESENT])
        jobs = self._table(x, "jobs", lay.jobs)
        job_emb = self.job_enc(jobs)
        pooled = _masked_mean(job_emb, jobs[..., _JOB_PRESENT])
        base = torch.cat([type_ctx, gl], 1)
        if self.ctx_queue is None:
            ctx = self.ctx(base)
        else:  # the first layer's input, plus the queue's term
            ctx = self.ctx[1:](self.ctx[0](base) + self.ctx_queue(pooled))
        return {"ctx": ctx, "jobs": jobs, "job_emb": job_emb, "pooled": pooled}

    def _pair_logits(
        self,
        x: torch.Tensor,
        key: str,
        rows: int,
        emb: torch.Tensor,
        ctx: torch.Tensor,
        scorer: nn.Sequential,
    ) -> torch.Tensor:
        c = self.layout.cells
        cells = self._table(x, key, rows * c).reshape(x.shape[0], rows, c, -1)
        extra = None
        if key == "running_cells" and self.run_rel is not None:
            current = (cells * cells[..., _CELL_IS_CURRENT : _CELL_IS_CURRENT + 1]).sum(2, True)
            extra = self.run_rel(cells - current)
        return _factored(scorer, cells, emb, ctx, extra).reshape(x.shape[0], rows * c)

    def _residual_view(self, features: torch.Tensor) -> torch.Tensor:
        """What the scorers and the value see: without the guide's columns unless allowed."""
        if self.guide_inputs:
            return features
        return features * self._residual_mask

    def forward_actor(self, features: torch.Tensor) -> torch.Tensor:
        """One logit per action."""
        seen = self._residual_view(features)
        return self._actor(features, seen, self._encode(seen))

    def _actor(
        self, raw: torch.Tensor, features: torch.Tensor, e: dict[str, torch.Tensor]
    ) -> torch.Tensor:
        """Logits: the scorers on ``features`` (the residual's view) plus the hint from ``raw``."""
        lay = self.layout
        parts = [
            self._pair_logits(features, "cells", lay.jobs, e["job_emb"], e["ctx"], self.cell_score)
        ]
        if lay.running:
            run = self._table(features, "running", lay.running)
            run_emb = self.run_enc(run)
            cells = self._pair_logits(
                features, "running_cells", lay.running, run_emb, e["ctx"], self.run_cell_score
            ).reshape(-1, lay.running, lay.cells)
            pre = self.preempt_score(
                torch.cat([run_emb, e["ctx"].unsqueeze(1).expand(-1, lay.running, -1)], -1)
            )
            parts.append(torch.cat([cells, pre], -1).reshape(features.shape[0], -1))
        parts.append(self.wait_score(torch.cat([e["ctx"], e["pooled"]], 1)))
        logits = torch.cat(parts, 1)
        if self.hint is not None:
            logits = logits + self.hint * self._proposal(raw)
        return logits

    def _proposal(self, x: torch.Tensor) -> torch.Tensor:
        """One-hot (batch, actions) of the guide's next action, from the observation."""
        lay = self.layout
        n, c = x.shape[0], lay.cells
        cells = self._table(x, "cells", lay.jobs * c)[..., CELL_GUIDE_NEXT]
        parts = [cells.reshape(n, lay.jobs * c)]
        if lay.running:
            run_cells = self._table(x, "running_cells", lay.running * c)[..., CELL_GUIDE_NEXT]
            pre = self._table(x, "running", lay.running)[..., JOB_GUIDE_PREEMPTS]
            block = torch.cat([run_cells.reshape(n, lay.running, c), pre.unsqueeze(-1)], -1)
            parts.append(block.reshape(n, -1))
        parts.append(self._table(x, "globals", 1)[:, 0, GLOBAL_GUIDE_WAIT : GLOBAL_GUIDE_WAIT + 1])
        return torch.cat(parts, 1)

    def forward_critic(self, features: torch.Tensor) -> torch.Tensor:
        """Value latent."""
        return self._critic(self._encode(self._residual_view(features)))

    def _critic(self, e: dict[str, torch.Tensor]) -> torch.Tensor:
        best = (e["job_emb"] * e["jobs"][..., :1]).amax(1)
        out: torch.Tensor = self.value(torch.cat([e["ctx"], e["pooled"], best], 1))
        return out

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(actor logits, critic latent), from one encoding of the tables shared by both heads."""
        seen = self._residual_view(features)
        e = self._encode(seen)
        return self._actor(features, seen, e), self._critic(e)


class RowScorerPolicy(MaskableMultiInputActorCriticPolicy):
    """MaskablePPO policy with the row-scoring network.

    Its policy_kwargs are :class:`RowScorer`'s: ``hidden``, ``hint_weight``, ``zero_init``,
    ``guide_inputs``, ``relative_cells`` and ``queue_context``.
    """

    def __init__(
        self,
        observation_space: spaces.Dict,
        action_space: spaces.Discrete,
        lr_schedule: Callable[[float], float],
        hidden: int = 128,
        hint_weight: float = 0.0,
        zero_init: bool = False,
        guide_inputs: bool = True,
        relative_cells: bool = False,
        queue_context: bool = False,
        **kwargs: Any,
    ) -> None:
        self.hidden = hidden
        self.hint_weight = hint_weight
        self.zero_init = zero_init
        self.guide_inputs = guide_inputs
        self.relative_cells = relative_cells
        self.queue_context = queue_context
        kwargs.setdefault("features_extractor_class", TableExtractor)
        kwargs.pop("net_arch", None)
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)

    def _build_mlp_extractor(self) -> None:
        layout = TableLayout.from_space(self.observation_space)  # type: ignore[arg-type]
        self.mlp_extractor = RowScorer(  # type: ignore[assignment]
            layout,
            self.hidden,
            self.hint_weight,
            self.zero_init,
            self.guide_inputs,
            self.relative_cells,
            self.queue_context,
        )

    def _build(self, lr_schedule: Callable[[float], float]) -> None:
        super()._build(lr_schedule)
        # The extractor already emits one logit per action: no linear head on top.
        self.action_net = nn.Identity()
        if self.zero_init:  # SB3's orthogonal initialisation ran after the extractor's
            assert isinstance(self.mlp_extractor, RowScorer)
            self.mlp_extractor.zero_last_layers()
            # A critic that starts at 0: returns relative to the guide are about 0.
            nn.init.zeros_(self.value_net.weight)
            nn.init.zeros_(self.value_net.bias)
        self.optimizer = self.optimizer_class(  # type: ignore[call-arg]
            self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs
        )

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(
            hidden=self.hidden,
            hint_weight=self.hint_weight,
            zero_init=self.zero_init,
            guide_inputs=self.guide_inputs,
            relative_cells=self.relative_cells,
            queue_context=self.queue_context,
        )
        return data
