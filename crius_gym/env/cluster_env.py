"""The Gymnasium environment: choose tuner-pruned Cells for waiting jobs, decision by decision.

One step is one decision (``docs/env.md``). Between decisions the simulator runs on; the agent is
never asked when WAIT would be its only valid action. See :class:`CriusEnv` for the specification.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from crius_gym.env.config import EnvConfig
from crius_gym.env.decision import (
    CellSelector,
    DecisionState,
    build_decision_state,
    express_next,
)
from crius_gym.env.features import ObservationEncoder
from crius_gym.env.guide import Guide, GuidePlan
from crius_gym.env.instant import InstantChanges
from crius_gym.env.reference import JobsInSystemIntegral
from crius_gym.env.render import render_cluster
from crius_gym.env.reset_options import checked_reset_options
from crius_gym.errors import ConfigError
from crius_gym.perf.tuner import Tuner
from crius_gym.policies.registry import make_policy
from crius_gym.scenarios import Scenario, load_scenario
from crius_gym.scenarios.trace_files import read_trace
from crius_gym.sim.actions import Action, InvalidActionError, Preempt, Reconfigure, Start
from crius_gym.sim.records import JobStatus
from crius_gym.sim.simulator import RunResult, Simulator
from crius_gym.workload.job import Trace
from crius_gym.workload.mapping import JobMapping


@dataclass
class _World:
    """One cluster the env can run: its scenario, tuner, simulator, selector and encoder."""

    scenario: Scenario
    tuner: Tuner
    sim: Simulator
    selector: CellSelector
    encoder: ObservationEncoder
    reward_scale_s: float

    @classmethod
    def build(cls, scenario: Scenario, cfg: EnvConfig, tuner: Tuner | None) -> _World:
        tuner = tuner or scenario.make_tuner()
        sim = scenario.make_simulator(tuner)
        synth = scenario.synthetic_config(tuner)
        scale = cfg.reward_scale_s or 10.0 * synth.mean_interarrival_s
        return cls(
            scenario, tuner, sim, CellSelector(sim, cfg), ObservationEncoder(cfg, sim, scale), scale
        )


def _action_index(action: Any, n: int) -> int:
    """An action as an index; floats, strings and booleans are refused, never cast.

    Integers and integer NumPy scalars or 0-d/1-element arrays (what vectorised wrappers pass)
    are accepted; the range is checked by the mask (an out-of-range action is invalid).
    """
    value = action
    if isinstance(value, np.ndarray):
        if value.size != 1 or not np.issubdtype(value.dtype, np.integer):
            raise InvalidActionError(f"action must be one integer in [0, {n}), got {action!r}")
        value = value.reshape(()).item()
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise InvalidActionError(f"action must be an integer in [0, {n}), got {action!r}")
    return int(value)


class CriusEnv(gym.Env[dict[str, np.ndarray], int]):
    """Schedule training jobs on a heterogeneous cluster by picking tuner-pruned Cells.

    ## Description
    A scenario's cluster runs a trace of training jobs in the event-driven simulator. At each
    decision the agent sees a window of K waiting jobs (the first ``head_jobs`` in arrival
    order, then the earliest later jobs that can start now), each with its tuner's top-C Cells
    (GPU type, GPU count in a node layout, pipeline stages) and their estimated speed, memory and
    time breakdown, plus the state of every GPU type.

    ## Action space
    ``Discrete(K·C + R·(C+1) + 1)``: start window job k on its Cell c (index k·C + c); with
    ``reconfigure`` also, for each of the first R running jobs, move it to one of its top-C Cells
    or preempt it; the last index is WAIT (run to the next arrival or completion). Invalid
    actions act as WAIT (or, when nothing can happen any more, as a no-op) and are counted in
    ``info["invalid_actions"]``. ``action_masks()`` and the ``action_mask`` observation key give
    the valid actions; until the episode ends at least one is valid.

    ## Observation space
    A flat ``Dict`` of float32 boxes in [0, 1] (see :mod:`crius_gym.env.features`) plus the
    int8 ``action_mask``. Shapes depend only on the env settings, not on the cluster.

    ## Rewards
    ``jct`` (default): −(jobs in system) × Δt / ``reward_scale_s`` over every simulated interval
    (none is ever skipped), which sums to −Σ JCT / scale over an episode that runs to completion.
    ``throughput``: the completed fraction of every job gained in the interval.

    ## Episodes
    Training episodes (``reset()`` without options) are fresh synthetic traces of the scenario's
    train split, drawn with the env's own RNG. ``reset(options={"split": "val"|"test"|"train",
    "index": i})`` replays trace i of a split (training traces have the scenario's
    ``train_episode_jobs`` jobs); ``reset(options={"trace": Trace})`` any trace, and
    ``reset(options={"trace": "path/to/file", "trace_format": "helios", "trace_seed": 0})`` any
    trace file the project reads (:func:`crius_gym.scenarios.trace_files.read_trace`; format
    detected when ``trace_format`` is absent; read once per file, seed and component).
    ``start_s`` (with any of these) starts the episode in mid-run: the guide schedules
    everything before that simulated time, as :meth:`step` would take its actions, and the
    agent's first decision is the first at or after it (the state a replay of the guide to that
    time reaches; the return counts from there). An episode
    terminates when every job finished or was rejected (or nothing can happen any more); it is
    truncated after ``max_decisions`` decisions. The final ``info`` carries the run's metrics.

    ## Arguments
    ``scenario`` (name or :class:`Scenario`), ``config`` (:class:`EnvConfig` or a mapping of its
    fields), ``render_mode`` (``None``, ``"ansi"`` or ``"rgb_array"``; another mode warns and
    renders nothing), ``tuner`` (a single scenario's tuner to use) or ``tuners`` (one per
    mixture component, in order — e.g. :attr:`tuners` of another env of the same scenario:
    a tuner's answers are pure functions of its cluster and estimator, so envs in one process
    can share them and tune each job once instead of once per env).

    ## Version history
    * v3: v1's dynamics, with the window's Cells an explicit setting
      (``window_cell_selection``, default ``fastest``); v1 policies load.
    * v2: window jobs showed the ``cell_selection`` (spread) Cells, as v1's documentation
      said; v1 had shown them the fastest Cells. Cloning and fine-tuning did worse (see
      ``docs/env.md``), so v3 restored v1's behaviour.
    * v1: a job changed at an instant cannot be restarted at that instant; preemption is
      offered only while a job waits (v0 let agents preempt and restart the same job in a loop).
    * v0: initial version.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}  # noqa: RUF012

    def __init__(
        self,
        scenario: str | Scenario = "hetero-64",
        config: EnvConfig | Mapping[str, Any] | None = None,
        render_mode: str | None = None,
        tuner: Tuner | None = None,
        tuners: Sequence[Tuner] | None = None,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            # Gymnasium's convention (and SB3's make_vec_env, which asks for rgb_array): warn.
            gym.logger.warn(
                f"render_mode {render_mode!r} not in {self.metadata['render_modes']}; "
                "render() will return None"
            )
        self.scenario = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
        self.config = config if isinstance(config, EnvConfig) else EnvConfig(**(config or {}))
        self.render_mode = render_mode
        components = [c for c, _ in self.scenario.mix] or [self.scenario]
        if tuner is not None and len(components) > 1:
            raise ConfigError("a mixture builds one tuner per component: pass no tuner")
        given: Sequence[Tuner | None] = [tuner] * len(components)
        if tuners is not None:
            if tuner is not None or len(tuners) != len(components):
                raise ConfigError(
                    f"tuners: one per component of {self.scenario.name} "
                    f"({len(components)}), and not with tuner"
                )
            for c, t in zip(components, tuners, strict=True):
                if t.cluster != c.cluster:
                    raise ConfigError(f"tuners: a tuner of another cluster for {c.name}")
            given = list(tuners)
        self._worlds = [
            _World.build(c, self.config, t) for c, t in zip(components, given, strict=True)
        ]
        self._use(0)
        self.observation_space = self.encoder.space  # type: ignore[assignment]
        self.action_space = gym.spaces.Discrete(self.config.num_actions)  # type: ignore[assignment]
        self._state: DecisionState | None = None
        self._trace: Trace | None = None
        self._finished = 0
        self._invalid = 0
        self._decisions = 0
        self._decisions_now = 0
        self._pending_reward = 0.0
        self._done_at_reset = False
        self._last_result: RunResult | None = None
        self._changes = InstantChanges(self.config.changes_per_instant)
        self.guide = Guide(self.config.guide) if self.config.guide else None
        self._guide_stats = {"proposals": 0, "followed": 0, "dropped": 0, "stalls": 0}
        self._baseline: JobsInSystemIntegral | None = None
        self._baselines: dict[str, JobsInSystemIntegral] = {}
        self._baseline_traces: dict[str, Trace] = {}
        self._trace_files: dict[tuple[str, int, str | None, int, int], Trace] = {}
        self._headless = False

    # ------------------------------------------------------------------ helpers
    def _checked_options(self, options: Mapping[str, Any] | None) -> dict[str, Any]:
        """``reset`` options, refused when a key, split or index is unknown (never ignored)."""
        return checked_reset_options(options, self.scenario, self.guide is not None)

    def _trace_file(self, opts: Mapping[str, Any]) -> Trace:
        """The trace file of ``reset`` options, read on this component's cluster (memoised)."""
        path = Path(opts["trace"])
        fmt, seed = opts.get("trace_format"), int(opts.get("trace_seed", 0))
        component = int(opts.get("component", 0))
        key = (str(path.resolve()), path.stat().st_mtime_ns, fmt, seed, component)
        hit = self._trace_files.get(key)
        if hit is None:
            hit = read_trace(path, fmt, tuner=self.tuner, mapping=JobMapping(seed=seed))
            if len(self._trace_files) >= 8:  # a few files replayed in turn; never unbounded
                self._trace_files.clear()
            self._trace_files[key] = hit
        return hit

    def _use(self, world: int) -> None:
        """Switch to one component's cluster (a plain scenario has only one)."""
        w = self._worlds[world]
        self.world = world
        self.world_scenario = w.scenario
        self.tuner, self.sim, self.selector = w.tuner, w.sim, w.selector
        self.encoder, self.reward_scale_s = w.encoder, w.reward_scale_s

    def _progress_total(self) -> float:
        """Σ over jobs of their completed fraction, exact at ``now``."""
        sim = self.sim
        total = float(self._finished)
        for i in (*sim.active_indices, *sim.waiting_indices):
            rec = sim.records[i]
            total += min(1.0, rec.progress_at(sim.now_s) / rec.job.iterations)
        return total

    def _advance_once(self) -> tuple[bool, float]:
        """Run to the next decision point; (still going, reward of the interval)."""
        sim = self.sim
        t0, n0 = sim.now_s, sim.jobs_in_system
        p0 = self._progress_total() if self.config.reward == "throughput" else 0.0
        going = sim.advance()
        if self.guide is not None:
            self.guide.invalidate()  # time moved: the guide plans afresh
        if going:
            sim.decisions += 1  # a simulator decision point, as counted by Simulator.run
        self._finished = (
            sum(1 for r in sim.records if r.status is JobStatus.FINISHED)
            if self.config.reward == "throughput"
            else self._finished
        )
        if self.config.reward == "jct":
            reward = -n0 * (sim.now_s - t0) / self.reward_scale_s
            if self._baseline is not None:  # the guide's own reward over the same interval
                reward += (self._baseline(sim.now_s) - self._baseline(t0)) / self.reward_scale_s
        else:
            reward = self._progress_total() - p0
        return going, reward

    def _next_decision(self, fresh: bool = False) -> tuple[float, bool]:
        """Advance until the agent has a real choice; (reward gathered, episode over).

        With ``stop_at_every_event`` the agent is consulted at every decision point and, after
        an action, again at the same instant: only WAIT moves time. ``fresh``: the current
        instant has not been shown to the agent yet (or it just acted there).
        """
        reward = 0.0
        every = self.config.stop_at_every_event
        while True:
            state = self._build_state()
            if state.has_choice or (every and fresh and state.wait_valid):
                self._state = state
                return reward, False
            if not state.wait_valid:
                self._state = state
                return reward, True
            going, r = self._advance_once()
            reward += r
            self._decisions_now = 0
            fresh = True
            if not going:
                self._state = self._build_state()
                return reward, True

    def _start_instant(self) -> None:
        """Forget the jobs acted on once time has moved (one change per job per instant)."""
        self._changes.start(self.sim.now_s)

    def _held(self) -> list[int]:
        """Waiting jobs changed at this instant (preempted now): no start until time moves."""
        recs = self.sim.records
        blocked = self._changes.blocked()
        return [i for i in blocked if recs[i].status is JobStatus.WAITING]

    def _guide_plan(self) -> GuidePlan:
        """The guide's plan now, its rejections applied (jobs it can never run: not a choice)."""
        assert self.guide is not None
        plan = self.guide.plan(self.sim, self._held())
        if plan.rejects:
            self.sim.apply(plan.rejects)
            plan.rejects = []
        return plan

    def _build_state(self) -> DecisionState:
        self._start_instant()
        acted, back = self._changes.blocked(), self._changes.origins()
        guide = self.guide
        if guide is None:
            return build_decision_state(self.sim, self.config, self.selector, acted, None, back)
        while True:
            plan = self._guide_plan()
            # Whether the proposal is one of the env's actions now, asked of its job alone
            # (express_next equals looking it up in the full state, which is built once).
            if (
                plan.next is None
                or express_next(self.sim, self.config, self.selector, acted, plan, back) is not None
            ):
                return build_decision_state(self.sim, self.config, self.selector, acted, plan, back)
            # Not one of the env's actions now (a job or Cell outside what is shown): skip it.
            guide.drop_next()
            self._guide_stats["dropped"] += 1

    def _obs(self) -> dict[str, np.ndarray]:
        assert self._state is not None
        if self._headless:  # a rollout copy: only its dynamics matter
            return {}
        return self.encoder.encode(self._state, self._decisions_now)

    def observation_tables(
        self, observation: Mapping[str, np.ndarray] | None = None, frames: bool = False
    ) -> dict[str, Any]:
        """An observation unflattened into its named tables, for reading and debugging.

        Args:
            observation: an observation of this env (default: the current one).
            frames: return pandas DataFrames with the feature names as columns instead of
                (rows, features) arrays.

        Returns:
            One entry per table key (``jobs``, ``cells``, ``cluster``, ``globals``, and with
            ``reconfigure`` ``running`` and ``running_cells``); padded rows are zeros.
        """
        obs = self.current_observation() if observation is None else observation
        tables = self.encoder.tables(obs)
        if not frames:
            return tables
        import pandas as pd  # only here: the env itself does not need pandas

        columns = self.encoder.columns
        return {key: pd.DataFrame(t, columns=list(columns[key])) for key, t in tables.items()}

    @property
    def tuners(self) -> list[Tuner]:
        """The tuner of each mixture component (one for a single scenario), in order."""
        return [w.tuner for w in self._worlds]

    def current_observation(self) -> dict[str, np.ndarray]:
        """The observation of the current decision (e.g. after :meth:`apply_external`)."""
        return self._obs()

    def _decode(self, action: int) -> Action | None:
        """The simulator action of a valid index (None for WAIT)."""
        cfg, st = self.config, self._state
        assert st is not None
        k, c = cfg.window_jobs, cfg.cells_per_job
        if action < cfg.start_actions:
            job, cell = st.window[action // c], st.cells[action // c][action % c]
            return Start(job.job.job_id, cell.cell, None, cfg.tuning)
        if action < cfg.start_actions + cfg.running_actions:
            r, j = divmod(action - k * c, c + 1)
            rec = st.running[r]
            if j == c:
                return Preempt(rec.job.job_id)
            return Reconfigure(rec.job.job_id, st.run_cells[r][j].cell, None, cfg.tuning)
        return None

    def _info(self, invalid: bool) -> dict[str, Any]:
        info: dict[str, Any] = {
            "invalid_action": invalid,
            "invalid_actions": self._invalid,
            "decisions": self._decisions,
            "sim_time_s": self.sim.now_s,
            "waiting": len(self.sim.waiting_indices),
            "running": len(self.sim.active_indices),
        }
        if self.guide is not None:
            info.update({f"guide_{k}": v for k, v in self._guide_stats.items()})
        return info

    def guide_action(self) -> int | None:
        """The env action the guide proposes now (its WAIT when it would do nothing more)."""
        if self.guide is None or self._state is None:
            return None
        nxt = self._guide_plan().next
        if nxt is None:
            return self._guide_wait(self._state)
        return self._index_in(self._state, nxt)

    def _guide_wait(self, state: DecisionState) -> int:
        """The env action of the guide's WAIT: WAIT, or its fallback when WAIT is not valid.

        Nothing left to wait for while something can still change (the guide's own proposals
        were not env actions, or its plan relied on a job the env holds back): the first valid
        action of the window, which is filled by the guide's ranking. Counted as a stall.
        Following the guide therefore always ends, as the simulator's run of the guide does.
        """
        if state.wait_valid or not state.has_choice:
            return self.config.num_actions - 1
        return int(np.flatnonzero(state.mask)[0])

    def rollout_cost(self, action: int, future: bool = True) -> float:
        """What taking ``action`` now, then following the guide to the end, costs (job-seconds).

        Runs a headless copy of this env (the episode itself is untouched; the copy encodes no
        observations): the action, then the guide's proposal at every decision, exactly as an
        agent that follows the guide from here on would run — the same plan, re-plans,
        windows and masks. The cost is Σ over jobs of their time in the system, so the
        difference of two actions' costs is the difference in total JCT they cause: the exact
        advantage of one action over another when the guide takes over (the simulator is
        deterministic). Used by the vine advantages of :mod:`crius_gym.rl.sequence_ppo`.

        Args:
            action: the env action taken now.
            future: roll out on the episode's trace, arrivals still to come included (a
                hindsight cost: it depends on arrivals no observation shows). False: on a copy
                that holds only the jobs already arrived, priced by the estimator
                (:meth:`Simulator.fork_present`), and the cost counts those jobs only; WAIT
                then runs to the next completion. The difference of two such costs is a
                function of the state, the label of the lookahead scheduler
                (:mod:`crius_gym.policies.lookahead`) restricted to the env's actions.

        Raises:
            ConfigError: the env has no guide.
        """
        if self.guide is None or self._state is None:
            raise ConfigError("rollout_cost needs a guide")
        env = self._headless_copy(future)
        _, _, term, trunc, _ = env.step(action)
        if not (term or trunc):
            env._follow_guide()
        return env.sim.time_in_system_s()

    def _follow_guide(self) -> None:
        """Run the episode to its end taking the guide's proposal at every decision.

        The same run as stepping the env with :meth:`guide_action` until it ends (the same
        plans, drops of proposals the env cannot express, rejections and instants), but
        without building each decision's full state: :func:`express_next` looks at the
        proposal's job only; where the guide waits with nothing left to wait for, its
        fallback (:meth:`_guide_wait`) is stepped as the env would. Rewards and counters are
        not kept: for headless copies.
        """
        guide, sim, cfg = self.guide, self.sim, self.config
        assert guide is not None
        while True:
            self._start_instant()
            plan = self._guide_plan()
            if plan.next is not None:
                changes = self._changes
                taken = express_next(
                    sim, cfg, self.selector, changes.blocked(), plan, changes.origins()
                )
                if taken is None:  # not an env action now: the env skips it
                    guide.drop_next()
                    continue
                i = plan.order[0]
                guide.followed(taken)
                changes.add(i, sim.records[i].cell)
                sim.apply([taken])
                continue
            if not sim.has_future_events:
                state = self._build_state()
                self._state = state
                if not state.has_choice:
                    return
                # The guide waits with nothing to wait for: its fallback, as step() takes it.
                _, _, term, trunc, _ = self.step(self._guide_wait(state))
                if term or trunc:
                    return
                continue
            going = sim.advance()
            guide.invalidate()
            if not going:
                self._state = self._build_state()
                return
            sim.decisions += 1

    #: Episode fields a rollout needs besides the simulator and the guide.
    _ROLLOUT_FIELDS = (
        "_changes",
        "_decisions",
        "_decisions_now",
        "_guide_stats",
        "_invalid",
        "_finished",
        "_pending_reward",
        "_done_at_reset",
        "_trace",
        "_episode_reward",
    )

    def rollout_state(self) -> dict[str, Any]:
        """The episode's state as plain picklable data (what :meth:`rollout_cost` needs).

        Leaves out everything another env of the same scenario and settings rebuilds the same
        way (tuners, catalogues, encoders), so a worker process holding such an env can answer
        :meth:`rollout_cost` for this episode after :meth:`restore_rollout_state`.
        """
        assert self.guide is not None
        policy = self.guide.policy
        return {
            "world": self.world,
            "sim": self.sim.state(),
            "plan": self.guide._plan,
            "ids": self.guide._ids,
            "policy": getattr(policy, "_resume_at", None),
            "env": {k: copy.copy(getattr(self, k)) for k in self._ROLLOUT_FIELDS},
        }

    def restore_rollout_state(self, state: dict[str, Any]) -> None:
        """Take on the episode state of another env of the same scenario and settings."""
        assert self.guide is not None
        self._use(int(state["world"]))
        self.sim.restore_state(state["sim"])
        self.guide._plan = state["plan"]
        self.guide._ids = state["ids"]
        if state["policy"] is not None:
            policy = self.guide.policy
            policy._resume_at = dict(state["policy"])  # type: ignore[attr-defined]
        for k, v in state["env"].items():
            setattr(self, k, v)
        self._last_result = None
        self._baseline = None
        self._state = self._build_state()

    def branch(self, future: bool = False) -> CriusEnv:
        """An independent copy of the episode so far that encodes observations.

        For rollouts of a network policy (:mod:`crius_gym.rl.network_rollouts`): the copy is
        stepped like the env and leaves this episode untouched. ``future`` False (default): it
        holds only the jobs already arrived, priced by the estimator (as
        :meth:`rollout_cost`'s); True: the episode's trace, arrivals to come included.
        """
        env = self._headless_copy(future)
        env._headless = False
        env.encoder = self.encoder.for_simulator(env.sim)
        return env

    def adopt(self, sim: Simulator) -> None:
        """Continue from another simulator's state: a decision point of someone else's run.

        For a saved agent behind the :class:`~crius_gym.sim.policy.Policy` boundary
        (:class:`~crius_gym.rl.agent_policy.AgentPolicy`), which decides on a snapshot's
        :meth:`~crius_gym.sim.snapshot.Snapshot.fork`: the agent then acts on this state with
        :meth:`step` until it chooses WAIT. The guide keeps its policy's state, as over an
        episode, and plans afresh; the episode's counters start again.

        Args:
            sim: a simulator of this env's cluster (e.g. ``snapshot.fork(estimated=False)``).

        Raises:
            ConfigError: ``sim`` runs another cluster.
        """
        if sim.cluster != self.sim.cluster:
            raise ConfigError(
                f"adopt: a simulator of another cluster than {self.world_scenario.name}'s"
            )
        self.sim = sim
        self.encoder = self.encoder.for_simulator(sim)
        self._trace = None
        self._changes.reset()
        self._decisions_now = 0
        self._pending_reward = self._episode_reward = 0.0
        self._done_at_reset = False
        self._baseline = None
        self._last_result = None
        if self.guide is not None:
            self.guide._ids = {r.job.job_id: r.index for r in sim.records}
            self.guide.invalidate()
        self._state = self._build_state()

    def _headless_copy(self, future: bool = True) -> CriusEnv:
        """A copy of the episode so far that can be stepped without encoding observations.

        ``future`` False: the copy holds only the jobs already arrived (see :meth:`rollout_cost`).
        """
        assert self.guide is not None
        env = copy.copy(self)
        env.sim = self.sim.clone() if future else self.sim.fork_present(estimated=True)
        policy = self.guide.policy
        # Shared, not copied: the cluster, the tuner and the policy's caches of speeds (pure
        # functions of the tuner); the copy gets its own bookkeeping.
        shared: dict[int, object] = {
            id(self.tuner): self.tuner,
            id(self.sim.cluster): self.sim.cluster,
        }
        for cache in ("_speeds", "_tables"):
            obj = getattr(policy, cache, None)
            if obj is not None:
                shared[id(obj)] = obj
        env.guide = copy.copy(self.guide)
        env.guide.policy = copy.deepcopy(policy, shared)
        env._changes = self._changes.copy()
        env._guide_stats = dict(self._guide_stats)
        env._baseline = None
        env._headless = True
        env._last_result = None
        env.config = dataclasses.replace(self.config, max_decisions=10**12)
        env._state = env._build_state()
        return env

    def _reference_run(self, trace: Trace) -> JobsInSystemIntegral:
        """The guide's run of ``trace`` on a fresh simulator (cached for named held-out traces)."""
        hit = self._baselines.get(trace.name)
        if hit is not None and self._baseline_traces.get(trace.name) is trace:
            return hit
        sim = self.world_scenario.make_simulator(self.tuner)
        assert self.config.guide is not None
        result = sim.run(trace, make_policy(self.config.guide))
        out = JobsInSystemIntegral(result.jobs)
        if len(self._baselines) >= 64:  # training traces are never replayed: keep a few
            self._baselines.clear()
            self._baseline_traces.clear()
        self._baselines[trace.name] = out
        self._baseline_traces[trace.name] = trace
        return out

    # ------------------------------------------------------------------ gymnasium API
    def action_masks(self) -> np.ndarray:
        """Valid actions now (bool; never all False before the episode ends)."""
        assert self._state is not None, "reset() first"
        return self._state.mask.copy()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start an episode (see the class docstring for ``options``)."""
        super().reset(seed=seed)
        opts = self._checked_options(options)
        warmup = 0
        if "trace" in opts:
            self._use(int(opts.get("component", 0)))
            given = opts["trace"]
            trace = given if isinstance(given, Trace) else self._trace_file(opts)
        elif opts.get("split") in ("val", "test"):
            self._use(int(opts.get("component", 0)))
            trace = self.world_scenario.synthetic_trace(
                opts["split"], int(opts.get("index", 0)), tuner=self.tuner
            )
        else:
            index = (
                int(opts["index"])
                if opts.get("split") == "train" and "index" in opts
                else int(self.np_random.integers(0, 2**31 - 1))
            )
            self._use(self.scenario.mix_component(index))
            sc = self.world_scenario
            own = sc.splits.train_episode_jobs
            given = self.config.episode_jobs
            jobs = own if given is None else self._scaled_jobs(own, given)
            warmup = self._scaled_jobs(own, self.config.warmup_jobs)
            if self.config.warmup_random and warmup:
                # A random point of the run: from an empty cluster to the longest warm-up.
                warmup = int(self.np_random.integers(0, warmup + 1))
            trace = sc.synthetic_trace("train", index, num_jobs=warmup + jobs, tuner=self.tuner)
        self._trace = trace
        self.sim.reset(trace)
        self._changes.reset()
        if self.guide is not None:
            self.guide.reset(self.sim.cluster, self.tuner, self.sim)
            self._guide_stats = dict.fromkeys(self._guide_stats, 0)
        self._baseline = (
            self._reference_run(trace) if self.config.reward_baseline == "guide" else None
        )
        self._invalid = 0
        self._decisions = 0
        self._decisions_now = 0
        self._finished = 0
        self._episode_reward = 0.0
        self._last_result = None
        reward, done = self._next_decision()
        handover_s = (
            float(opts["start_s"])
            if "start_s" in opts
            else (trace.jobs[warmup].arrival_s if warmup else None)
        )
        if handover_s is not None and not done:
            done = self._warm_up(handover_s)
            reward = 0.0  # the agent's episode starts at the hand-over
        self._episode_reward += reward
        self._pending_reward = reward  # time before the first decision is charged on step 1
        self._done_at_reset = done
        return self._obs(), self._info(False)

    def _scaled_jobs(self, own: int, configured: int) -> int:
        """``configured`` jobs of the mixture scaled to a component of ``own`` episode jobs."""
        if configured <= 0:
            return 0
        return max(1, round(own * configured / self.scenario.splits.train_episode_jobs))

    def _warm_up(self, handover_s: float) -> bool:
        """Let the guide decide until ``handover_s``; returns whether the episode already ended.

        With ``warmup_noise``, a share of its decisions (drawn per episode) is WAIT instead.

        The guide's actions are taken through :meth:`step`, exactly as an agent that follows
        it would take them, without encoding observations; the episode's counters then start
        afresh, so the agent's return covers only the time after the hand-over.
        """
        headless, self._headless = self._headless, True
        done = False
        wait = self.config.num_actions - 1
        # No draw at all without noise, so the RNG stream (and every run) is unchanged.
        noise = (
            float(self.np_random.uniform(0.0, self.config.warmup_noise))
            if self.config.warmup_noise
            else 0.0
        )
        try:
            while not done and self.sim.now_s < handover_s:
                proposal = self.guide_action()
                a = wait if proposal is None else proposal
                if (
                    noise
                    and self._state is not None
                    and self._state.wait_valid
                    and self.np_random.random() < noise
                ):
                    a = wait
                _, _, term, trunc, _ = self.step(a)
                done = term or trunc
        finally:
            self._headless = headless
        self._guide_stats = dict.fromkeys(self._guide_stats, 0)
        self._invalid = 0
        self._decisions = 0
        self._episode_reward = 0.0
        self._last_result = None
        return done

    def step(
        self, action: int
    ) -> tuple[dict[str, np.ndarray], SupportsFloat, bool, bool, dict[str, Any]]:
        """Apply one decision and run on to the next (see the class docstring)."""
        assert self._state is not None, "reset() first"
        a = _action_index(action, self.config.num_actions)
        state = self._state
        stalled = not state.has_choice and not state.wait_valid
        invalid = not stalled and not (0 <= a < len(state.mask) and state.mask[a])
        reward = self._pending_reward
        self._pending_reward = 0.0
        self._decisions += 1
        terminated = self._done_at_reset or stalled
        if not terminated:
            sim_action = None if invalid else self._decode(a)
            if invalid:
                self._invalid += 1
            if self.guide is not None and state.has_choice:
                nxt = self._guide_plan().next
                self._guide_stats["proposals"] += 1
                self._guide_stats["stalls"] += int(nxt is None and not state.wait_valid)
                self._guide_stats["followed"] += int(
                    (sim_action is None and nxt is None and not invalid) or sim_action == nxt
                )
                self.guide.followed(sim_action)
            if sim_action is not None:
                i = self._job_index(sim_action.job_id)
                self._changes.add(i, self.sim.records[i].cell)
                self.sim.apply([sim_action])
                self._decisions_now += 1
                r, terminated = self._next_decision(fresh=True)
                reward += r
            elif state.wait_valid:
                going, r = self._advance_once()
                reward += r
                self._decisions_now = 0
                if going:
                    r, terminated = self._next_decision(fresh=True)
                    reward += r
                else:
                    terminated = True
                    self._state = self._build_state()
            else:  # invalid with nothing left to wait for: a no-op
                terminated = not state.has_choice
        self._episode_reward += reward
        truncated = not terminated and self._decisions >= self.config.max_decisions
        info = self._info(invalid)
        if terminated or truncated:
            info.update(self.episode_metrics())
        return self._obs(), float(reward), bool(terminated), bool(truncated), info

    def episode_metrics(self) -> dict[str, Any]:
        """The run's metrics now, as the last ``info`` of an episode carries them.

        The simulator's summary (``avg_jct_s``, ``finished`` …; its decision points as
        ``sim_decisions``, so ``decisions`` keeps counting agent decisions), the same under
        ``episode_metrics``, and the ``trace``. Called by the env at its own end of an episode
        and by :class:`crius_gym.env.wrappers.EpisodeMetrics` when a ``TimeLimit`` ends it.
        """
        result = self.sim.result("agent")
        self._last_result = result
        summary = result.summary.as_dict()
        summary["sim_decisions"] = summary.pop("decisions")
        return {**summary, "episode_metrics": dict(summary), "trace": result.trace}

    def _job_index(self, job_id: str) -> int:
        assert self._state is not None
        for rec in (*self._state.window, *self._state.running):
            if rec.job.job_id == job_id:
                return rec.index
        return next(r.index for r in self.sim.records if r.job.job_id == job_id)

    # ------------------------------------------------------------------ drivers
    @property
    def trace(self) -> Trace | None:
        """The episode's trace (warm-up jobs included; None before the first reset)."""
        return self._trace

    @property
    def decision_points(self) -> int:
        """Simulator decision points reached in this episode (arrival/completion instants)."""
        return self.sim.decisions

    def action_index(self, action: Action) -> int | None:
        """The env action expressing a simulator action now, or None if it cannot.

        A Start is expressible when its job is in the window and its Cell among the job's
        candidates (with no extra plan constraints); a Reconfigure or Preempt when the env has
        the running-job block and the job is among the running jobs shown.
        """
        assert self._state is not None
        return self._index_in(self._state, action)

    def _index_in(self, st: DecisionState, action: Action) -> int | None:
        cfg = self.config
        c = cfg.cells_per_job
        if isinstance(action, Start | Reconfigure) and action.tuning != cfg.tuning:
            return None  # the env's actions pay its own tuning mode
        if isinstance(action, Start) and action.constraints is None:
            for k, rec in enumerate(st.window):
                if rec.job.job_id == action.job_id:
                    for j, ce in enumerate(st.cells[k]):
                        if ce.cell == action.cell and st.fits[k, j]:
                            return k * c + j
            return None
        if cfg.reconfigure and isinstance(action, Preempt | Reconfigure):
            for r, rec in enumerate(st.running):
                if rec.job.job_id != action.job_id:
                    continue
                base = cfg.start_actions + r * (c + 1)
                if isinstance(action, Preempt):
                    return base + c if st.run_valid[r, c] else None
                if action.constraints is None:
                    for j, ce in enumerate(st.run_cells[r]):
                        if ce.cell == action.cell and st.run_valid[r, j]:
                            return base + j
        return None

    def apply_external(self, actions: list[Action]) -> None:
        """Apply simulator actions the action space cannot express, at the current instant.

        Used by drivers that run a rule-based policy through the env (parity tests, imitation).
        Time does not move; the decision state is rebuilt.
        """
        recs = self.sim.records
        changed = [(i, recs[i].cell) for i in (self._job_index(a.job_id) for a in actions)]
        self.sim.apply(actions)
        self._changes.update(changed)
        if self.guide is not None:
            self.guide.invalidate()
        self._state = self._build_state()

    def episode_result(self) -> RunResult | None:
        """The finished episode's full result (per-job rows, time series), if it ended."""
        return self._last_result

    def render(self) -> str | np.ndarray | None:
        """The decision as text (``ansi``) or the cluster as a picture (``rgb_array``).

        The picture shows GPU occupancy per type and node and the queue
        (:mod:`crius_gym.env.render`).
        """
        if self._state is None:
            return None
        if self.render_mode == "rgb_array":
            alloc = self.sim.allocator
            return render_cluster(
                self.sim.cluster,
                {t: alloc.free_per_node(t) for t in self.sim.cluster.gpu_types},
                len(self.sim.waiting_indices),
                len(self.sim.active_indices),
            )
        if self.render_mode != "ansi":
            return None
        st = self._state
        lines = [
            f"t={st.now_s:,.0f}s waiting={st.waiting_total} running="
            f"{len(self.sim.active_indices)} busy={self.sim.allocator.busy_gpus()}/"
            f"{self.sim.cluster.num_gpus} GPUs"
        ]
        for i, (rec, cells) in enumerate(zip(st.window, st.cells, strict=True)):
            opts = ", ".join(
                f"{'*' if st.fits[i, j] else ' '}{ce.cell} {ce.iter_time_s:.2f}s"
                for j, ce in enumerate(cells)
            )
            lines.append(
                f"  [{i}] {rec.job.job_id} {rec.job.model.name}/{rec.job.global_batch}: {opts}"
            )
        return "\n".join(lines)
