"""The DAgger teacher as a policy: what imitation can reach in the env's action space.

A distilled network can at best do what its labels do. The labels are the lookahead's choices
restricted to the actions the env can express now (:class:`~crius_gym.rl.dagger.EnvLookahead`),
so the ceiling of distillation is that restricted teacher driving the env, not the lookahead
scheduler run through the simulator. :func:`run_teacher` measures it on a trace, and counts how
often the unrestricted lookahead (same options, same rollout policy, same state) would have
chosen an action the env cannot express, and why.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.policies.lookahead import LookaheadOptions, LookaheadPolicy
from crius_gym.rl.dagger import EnvLookahead
from crius_gym.sim.actions import Action, Reconfigure, Start
from crius_gym.workload.job import Trace

#: Why the unrestricted lookahead's choice was not an env action (keys of ``inexpressible``).
REASONS = (
    "start: job not in the window",
    "start: Cell not shown",
    "move: job not shown",
    "move: job changed at this instant",
    "move: Cell not shown",
    "move: shown, not valid",
    "other",
)


@dataclass
class TeacherRun:
    """One trace driven by the env-restricted teacher.

    Attributes:
        metrics: the env's episode metrics (``avg_jct_s``, ``avg_jct_censored_s``,
            ``avg_throughput`` …).
        labels: states with a choice that the teacher labelled (others: the guide's action).
        label_s: wall time spent labelling.
        compared: states where the unrestricted lookahead was also asked (``compare_free``).
        inexpressible: of those, how often its first action was no env action, by reason.
    """

    metrics: dict[str, Any]
    labels: int = 0
    label_s: float = 0.0
    compared: int = 0
    inexpressible: Counter[str] = field(default_factory=Counter)

    @property
    def inexpressible_share(self) -> float:
        """Share of compared states whose unrestricted choice the env cannot express."""
        return sum(self.inexpressible.values()) / self.compared if self.compared else float("nan")


def _reason(env: CriusEnv, action: Action) -> str:
    """Why the env cannot express ``action`` now (one of :data:`REASONS`)."""
    st = env._state
    assert st is not None
    if isinstance(action, Start):
        rows = [k for k, rec in enumerate(st.window) if rec.job.job_id == action.job_id]
        return "start: Cell not shown" if rows else "start: job not in the window"
    if isinstance(action, Reconfigure):
        rows = [r for r, rec in enumerate(st.running) if rec.job.job_id == action.job_id]
        if not rows:
            return "move: job not shown"
        r = rows[0]
        if not any(st.run_valid[r]):
            return "move: job changed at this instant"
        if all(ce.cell != action.cell for ce in st.run_cells[r]):
            return "move: Cell not shown"
        return "move: shown, not valid"
    return "other"


def run_teacher(
    env: CriusEnv,
    options: LookaheadOptions,
    trace: Trace,
    seed: int = 0,
    compare_free: bool = False,
) -> TeacherRun:
    """Run ``trace`` through ``env`` with the teacher's label as the action at every choice.

    Args:
        env: an env with a guide (the teacher's rollout policy and its proposal).
        options: the teacher's lookahead settings (as ``distill_lookahead.py --set``).
        trace: the trace, run whole from an empty cluster.
        seed: the env's reset seed.
        compare_free: also ask the unrestricted lookahead (``max_steps=1``, the env guide's
            policy as base) at each labelled state and count its inexpressible choices.

    Returns:
        the run's metrics and counts. States the teacher cannot label take the guide's action.
    """
    assert env.guide is not None, "the teacher's rollout policy is the env's guide"
    env.reset(seed=seed, options={"trace": trace})
    run = TeacherRun(metrics={})
    free_opts = replace(options, max_steps=1)
    while True:
        mask = env.action_masks()
        guide = env.guide_action()
        assert guide is not None  # the env has a guide
        action = guide
        if mask[:-1].any():
            t = time.perf_counter()
            label = EnvLookahead(env, options).label()
            run.label_s += time.perf_counter() - t
            if label is not None:
                run.labels += 1
                action = label
            if compare_free:
                free = LookaheadPolicy(free_opts, base=env.guide.policy)
                chosen = free.decide(env.sim.snapshot())
                run.compared += 1
                if chosen:
                    index = env.action_index(chosen[0])
                    if index is None or not mask[index]:
                        run.inexpressible[_reason(env, chosen[0])] += 1
        _, _, term, trunc, info = env.step(action)
        if term or trunc:
            run.metrics = dict(info)
            return run


def run_guide(env: CriusEnv, trace: Trace, seed: int = 0) -> dict[str, Any]:
    """The guide (Crius) driving the env on ``trace``: the teacher's baseline, same env."""
    env.reset(seed=seed, options={"trace": trace})
    while True:
        guide = env.guide_action()
        assert guide is not None  # the env has a guide
        _, _, term, trunc, info = env.step(guide)
        if term or trunc:
            return dict(info)
