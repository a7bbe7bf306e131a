"""The guide: a rule-based policy whose next action the environment proposes to the agent.

At every decision the guide (the Crius heuristic by default) plans what it would do at this
instant — an ordered list of actions, valid in order, exactly what it returns to the simulator.
The environment makes sure each of them is one of its actions (the guide's jobs are in the
window, their Cells among the Cells shown) and, with ``EnvConfig.guide_hint``, marks the next
one in the observation. An agent that always takes the marked action *is* the guide: its run
equals the guide's simulator run. When the agent takes the guide's next action the plan goes on
with the rest; any other action makes the guide re-plan on the new state (a rule-based policy is
a function of the snapshot it is given).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np

from crius_gym.hardware.cluster import ClusterSpec
from crius_gym.perf.cell import Cell
from crius_gym.perf.tuner import Tuner
from crius_gym.plugins import make_policy
from crius_gym.sim.actions import Action, Preempt, Reconfigure, Reject, Start
from crius_gym.sim.policy import Policy, PolicyContext
from crius_gym.sim.simulator import Simulator


@dataclass
class GuidePlan:
    """The guide's remaining plan at the current instant, indexed for the env.

    Attributes:
        actions: the remaining actions, in order (the first is the proposal).
        starts: trace index → Cell of each planned Start.
        moves: trace index → Cell of each planned Reconfigure.
        preempts: trace indices of planned Preempts.
        order: trace indices of the jobs the plan acts on, in plan order.
        rejects: Rejects the guide decided (a job it can never run); the env applies them at
            once, outside the agent's actions.
    """

    actions: list[Action] = field(default_factory=list)
    starts: dict[int, Cell] = field(default_factory=dict)
    moves: dict[int, Cell] = field(default_factory=dict)
    preempts: set[int] = field(default_factory=set)
    order: list[int] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)

    @property
    def next(self) -> Action | None:
        """The proposal (None: the guide would wait)."""
        return self.actions[0] if self.actions else None


class Guide:
    """Holds a rule-based policy and its plan for the current instant of one env.

    Args:
        name: a registered policy name (e.g. ``crius``) or a plug-in (``module:Class``,
            ``file.py:Class``, an entry point of ``crius_gym.policies``;
            :mod:`crius_gym.plugins`). The env copies episodes for its rollouts without the
            policy object, so a guide should decide from the snapshot alone (Crius's
            ``_resume_at`` is the one piece of policy state the copies carry).
        seed: seed of the policy's random generator.
    """

    def __init__(self, name: str, seed: int = 0) -> None:
        self.name = name
        self.seed = seed
        self.policy: Policy = make_policy(name, option="env.guide")
        self._plan: GuidePlan | None = None
        self._ids: dict[str, int] = {}
        self.replans = 0

    def reset(self, cluster: ClusterSpec, tuner: Tuner, sim: Simulator | None) -> None:
        """Start an episode: fresh policy state, no plan (``sim`` None: no jobs yet)."""
        self.policy.reset(PolicyContext(cluster, tuner, np.random.default_rng(self.seed)))
        self._ids = {} if sim is None else {r.job.job_id: r.index for r in sim.records}
        self._plan = None
        self.replans = 0

    def invalidate(self) -> None:
        """Forget the plan (time moved, or the agent did something else)."""
        self._plan = None

    def plan(self, sim: Simulator, held: Collection[int] = ()) -> GuidePlan:
        """The plan at the current state (decided now if there is none).

        Args:
            sim: the env's simulator.
            held: trace indices of waiting jobs the env will not start at this instant (it
                changes a job once per instant: these were preempted now). The policy plans
                without them, as if they had not arrived yet, instead of planning a restart
                the env would drop.
        """
        if self._plan is None:
            self.replans += 1
            snapshot = sim.snapshot()
            if held:
                snapshot = snapshot.holding_back(held)
            decided = list(self.policy.decide(snapshot))
            self._plan = self._index([a for a in decided if not isinstance(a, Reject)])
            self._plan.rejects = [a for a in decided if isinstance(a, Reject)]
        return self._plan

    def _index(self, actions: list[Action]) -> GuidePlan:
        plan = GuidePlan(actions=actions)
        for a in actions:
            i = self._ids[a.job_id]
            plan.order.append(i)
            if isinstance(a, Start):
                plan.starts[i] = a.cell
            elif isinstance(a, Reconfigure):
                plan.moves[i] = a.cell
            elif isinstance(a, Preempt):
                plan.preempts.add(i)
        return plan

    def followed(self, action: Action | None) -> None:
        """The agent took ``action`` (None: WAIT); keep the rest of the plan if it was the next."""
        plan = self._plan
        if plan is None or action is None or plan.next != action:
            self._plan = None
            return
        self._plan = self._index(plan.actions[1:])

    def drop_next(self) -> None:
        """Skip the proposal (it is not an env action now) and go on with the rest."""
        if self._plan is not None and self._plan.actions:
            self._plan = self._index(self._plan.actions[1:])
