"""The driver: runs a trace on a Ray cluster under a scheduler, through the simulator's types.

The loop is the simulator's, with the wall clock for time and the agents for completions: jobs
arrive when the scaled clock reaches their submission time; at each arrival, completion,
failure or tick the policy gets :meth:`Ledger.snapshot` and its actions go to the ledger first
(validated exactly as the simulator validates them) and then to the agents: every gang whose
placement changed is stopped (a checkpoint of its exact progress is written and read back),
then every job that now holds GPUs is launched from its progress, after the pause the ledger
charged (tuning, restore). A job finishes when its leader says so.

Faults: each agent has a pending ``sentinel`` call that fails when the agent dies. The jobs with
a member there lose their other members and go back to the queue from their last checkpoint
(the iterations since then are counted as redone work); if the agent's Ray node is gone, its
scenario nodes go offline, else the restarted agent takes jobs again.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from crius_gym.errors import ConfigError
from crius_gym.runtime.agent import LaunchSpec, read_checkpoint
from crius_gym.runtime.cluster import AgentSlot, NodeKey, node_alive
from crius_gym.runtime.ledger import Ledger
from crius_gym.sim.policy import Policy, PolicyContext
from crius_gym.sim.records import JobStatus
from crius_gym.sim.simulator import RunResult
from crius_gym.workload.job import Trace


def _agent_gone() -> tuple[type[Exception], ...]:
    """The errors of a call to an agent that died or whose node is gone."""
    import ray

    return (ray.exceptions.RayActorError, ray.exceptions.ActorUnschedulableError)


@dataclass(frozen=True)
class RuntimeConfig:
    """How the runtime runs.

    Attributes:
        time_scale: scenario seconds per wall second (1,000: a scenario hour in 3.6 s).
        checkpoint_every_s: scenario seconds between a running job's periodic checkpoints.
        agent_restart_timeout_s: wall seconds to wait for a crashed agent to come back.
    """

    time_scale: float = 1000.0
    checkpoint_every_s: float = 600.0
    agent_restart_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if not (self.time_scale > 0 and np.isfinite(self.time_scale)):
            raise ConfigError(f"time_scale must be a positive number, not {self.time_scale}")
        if not (self.checkpoint_every_s > 0 and np.isfinite(self.checkpoint_every_s)):
            raise ConfigError(
                f"checkpoint_every_s must be a positive number, not {self.checkpoint_every_s}"
            )
        if not self.agent_restart_timeout_s > 0:
            raise ConfigError("agent_restart_timeout_s must be > 0")


@dataclass
class RuntimeStats:
    """What the runtime measured beside the run's metrics.

    Attributes:
        wall_s: wall seconds of the run.
        failures: gangs lost to a dead agent or node.
        agent_restarts: agents that died and came back.
        nodes_lost: scenario nodes taken offline.
        redone_iters: iterations lost since the last checkpoints (run again).
        redone_gpu_s: those iterations in GPU-seconds of scenario time.
        checkpoints: checkpoints written (periodic and on stops).
        decision_wall_s: wall seconds of each decision (policy and bookkeeping).
        launch_wall_s: wall seconds of each batch of agent calls.
    """

    wall_s: float = 0.0
    failures: int = 0
    agent_restarts: int = 0
    nodes_lost: int = 0
    redone_iters: float = 0.0
    redone_gpu_s: float = 0.0
    checkpoints: int = 0
    decision_wall_s: list[float] = field(default_factory=list)
    launch_wall_s: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, float | int]:
        """Flat columns for a summary row."""
        dec = np.array(self.decision_wall_s or [0.0])
        lau = np.array(self.launch_wall_s or [0.0])
        return {
            "wall_s": round(self.wall_s, 3),
            "failures": self.failures,
            "agent_restarts": self.agent_restarts,
            "nodes_lost": self.nodes_lost,
            "redone_iters": round(self.redone_iters, 3),
            "redone_gpu_h": round(self.redone_gpu_s / 3600.0, 4),
            "checkpoints": self.checkpoints,
            "decision_ms_mean": round(1e3 * float(dec.mean()), 3),
            "decision_ms_p99": round(1e3 * float(np.percentile(dec, 99)), 3),
            "launch_ms_mean": round(1e3 * float(lau.mean()), 3),
        }


@dataclass(frozen=True)
class RuntimeResult:
    """A run on the cluster: the same result as a simulator run, and the runtime's own numbers."""

    result: RunResult
    stats: RuntimeStats


@dataclass
class _Gang:
    """A launched job: its launch key, agents (leader first) and the leader's pending wait."""

    key: str
    agents: list[int]
    wait: Any


class ClusterRuntime:
    """Runs traces on the agents of a Ray cluster (see the module docstring).

    Args:
        ledger: the books (a :class:`Ledger` of the scenario).
        slots: the agents, from :func:`~crius_gym.runtime.cluster.start_agents`.
        checkpoint_dir: where jobs write checkpoints (emptied of earlier runs' files first).
        config: settings.
    """

    def __init__(
        self,
        ledger: Ledger,
        slots: list[AgentSlot],
        checkpoint_dir: str | Path,
        config: RuntimeConfig | None = None,
    ) -> None:
        self.ledger = ledger
        self.slots = slots
        self.checkpoint_dir = Path(checkpoint_dir)
        self.config = config or RuntimeConfig()
        self._agent_of: dict[NodeKey, int] = {
            (t, k): r for r, s in enumerate(slots) for t, k, _ in s.block
        }
        missing = [
            (g.gpu_type, k)
            for g in ledger.cluster.groups
            for k in range(g.num_nodes)
            if (g.gpu_type, k) not in self._agent_of
        ]
        if missing:
            raise ConfigError(f"no agent hosts scenario nodes {missing[:5]}")

    # ------------------------------------------------------------------ the loop
    def run(
        self,
        trace: Trace,
        policy: Policy,
        *,
        seed: int = 0,
        on_step: Callable[[ClusterRuntime, float], None] | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> RuntimeResult:
        """Run a policy over a trace until every job finished or was rejected.

        Args:
            trace: the jobs.
            policy: the scheduler.
            seed: seeds the policy's random generator.
            on_step: called with the runtime and the scenario time at every turn of the loop
                (tests inject faults here).
            on_progress: ``on_progress(done_jobs, total_jobs)`` after each decision.
        """
        import ray

        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        for old in self.checkpoint_dir.glob("job*.json"):
            old.unlink()
        led = self.ledger
        led.reset(trace, None, policy.tick_interval_s)
        for slot in self.slots:  # nodes lost in an earlier run of this cluster stay lost
            if not slot.alive:
                for gpu_type, k, _ in slot.block:
                    led.take_offline(gpu_type, k)
        policy.reset(PolicyContext(led.cluster, led.tuner, np.random.default_rng(seed)))
        self._gangs: dict[int, _Gang] = {}
        self._launches = 0
        self._run_tag = uuid.uuid4().hex[:8]  # launch keys are never reused, across runs too
        self.stats = RuntimeStats()
        scale = self.config.time_scale
        total = len(trace.jobs)
        start_wall = time.monotonic()

        def now_s() -> float:
            return (time.monotonic() - start_wall) * scale

        self._now_s = now_s
        self._due = False  # a decision is due (an arrival, tick, finish or failure happened)
        while led.open_jobs > 0:
            self._due = led.advance_to(now_s()) or self._due
            if on_step is not None:
                on_step(self, led.now_s)
            self._collect(timeout_s=0.0)
            if self._due:
                self._due = False
                t0 = time.monotonic()
                led.now_s = max(led.now_s, now_s())
                led.decisions += 1
                actions = policy.decide(led.snapshot())
                self.stats.decision_wall_s.append(time.monotonic() - t0)
                if actions:
                    self._execute(actions, now_s)
                if on_progress is not None:
                    on_progress(total - led.open_jobs, total)
                continue
            nxt = led.next_event_s
            if not self._gangs and not led.has_future_events:
                break  # nothing runs and nothing will come: the rest stays unfinished (as in
                # the simulator, e.g. a job too big for the nodes left after a node loss)
            timeout = 0.5 if nxt is None else min(0.5, max(0.0, (nxt - now_s()) / scale))
            self._collect(timeout_s=timeout)
        led.advance_to(now_s())
        self.stats.wall_s = time.monotonic() - start_wall
        self.stats.checkpoints = sum(
            read_checkpoint(self.checkpoint_dir, i)[1] for i in range(total)
        )
        for gang in list(self._gangs.values()):  # left running by a policy that stopped early
            ray.get([self.slots[a].handle.stop.remote(gang.key, False) for a in gang.agents])
        return RuntimeResult(led.result(policy.name), self.stats)

    # ------------------------------------------------------------------ agents → ledger
    def _collect(self, timeout_s: float) -> None:
        """Take the agents' reports (finishes, deaths) that arrive within ``timeout_s``.

        Each is booked at the time it was taken, and makes a decision due.
        """
        import ray

        waits = {g.wait: i for i, g in self._gangs.items()}
        sentinels = {s.sentinel: r for r, s in enumerate(self.slots) if s.alive}
        refs = [*waits, *sentinels]
        if not refs:
            if timeout_s > 0:
                time.sleep(timeout_s)
            return
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout_s, fetch_local=False)
        if not ready:
            return
        ready, _ = ray.wait(  # and all else ready now
            refs, num_returns=len(refs), timeout=0, fetch_local=False
        )
        self._due = self.ledger.advance_to(self._now_s()) or self._due
        dead: set[int] = set()
        for ref in ready:
            if ref in sentinels:
                dead.add(sentinels[ref])
                continue
            index = waits[ref]
            try:
                report = ray.get(ref)
            except _agent_gone():
                dead.add(self._gangs[index].agents[0])
                continue
            gang = self._gangs.get(index)
            if gang is None or report.get("key") != gang.key:
                continue  # a launch the driver already stopped or failed
            if report["status"] != "finished":  # would leave the job running forever
                raise RuntimeError(f"{gang.key} was stopped behind the driver's back: {report}")
            del self._gangs[index]
            # Waited for: a later launch on these nodes must find the GPUs free.
            with contextlib.suppress(*_agent_gone()):  # a dead member is reported by its sentinel
                ray.get(
                    [self.slots[a].handle.stop.remote(gang.key, False) for a in gang.agents[1:]]
                )
            self.ledger.complete(index)
            self._due = True
        for r in sorted(dead):
            self._agent_died(r)
            self._due = True

    def _agent_died(self, r: int) -> None:
        import ray

        slot = self.slots[r]
        led = self.ledger
        failed_keys = []
        for index, gang in sorted(self._gangs.items()):
            if r not in gang.agents:
                continue
            del self._gangs[index]
            failed_keys.append(gang.key)
            aborts = [  # no checkpoint: the gang lost a member, its progress since is lost
                self.slots[a].handle.stop.remote(gang.key, False)
                for a in gang.agents
                if a != r and self.slots[a].alive
            ]
            with contextlib.suppress(*_agent_gone()):
                ray.get(aborts)
            rec = led.records[index]
            iter_time_s, gpus = rec.iter_time_s, rec.num_gpus
            saved, _ = read_checkpoint(self.checkpoint_dir, index)
            lost = led.fail(index, saved)
            self.stats.failures += 1
            self.stats.redone_iters += lost
            self.stats.redone_gpu_s += lost * iter_time_s * gpus
        if node_alive(slot.ray_node_id):
            # The process died, not the node: Ray restarts the agent (max_restarts=-1).
            ray.get(slot.handle.ping.remote(), timeout=self.config.agent_restart_timeout_s)
            # Calls sent after the crash reach the new instance: end the failed launches there.
            ray.get([slot.handle.stop.remote(key, False) for key in failed_keys])
            slot.sentinel = slot.handle.sentinel.remote()
            self.stats.agent_restarts += 1
            return
        slot.alive = False
        with contextlib.suppress(Exception):  # its node is gone: stop Ray restarting it forever
            ray.kill(slot.handle, no_restart=True)
        for gpu_type, k, _ in slot.block:
            led.take_offline(gpu_type, k)
            self.stats.nodes_lost += 1

    # ------------------------------------------------------------------ ledger → agents
    def _execute(self, actions: Any, now_s: Callable[[], float]) -> None:
        import ray

        led = self.ledger
        touched = {led._by_id[a.job_id] for a in actions if a.job_id in led._by_id}
        before = {i: led.records[i].version for i in touched}
        led.apply(actions)  # raises InvalidActionError as the simulator would
        t0 = time.monotonic()
        changed = [i for i in sorted(touched) if led.records[i].version != before[i]]
        stops = []
        for i in changed:
            gang = self._gangs.pop(i, None)
            if gang is not None:
                calls = [self.slots[a].handle.stop.remote(gang.key, True) for a in gang.agents]
                stops.append((i, calls))
        for i, calls in stops:
            try:
                progress = ray.get(calls)[0]
            except _agent_gone():  # its sentinel reports the death; the ledger's estimate stands
                progress = None
            if progress is not None:
                led.set_progress(i, progress)
        led.now_s = max(led.now_s, now_s())
        for i in changed:
            rec = led.records[i]
            if rec.placement is None or rec.status not in (JobStatus.RUNNING, JobStatus.PAUSED):
                continue
            self._launch(i)
        self.stats.launch_wall_s.append(time.monotonic() - t0)

    def _launch(self, index: int) -> None:
        import ray

        led = self.ledger
        rec = led.records[index]
        assert rec.placement is not None
        p = rec.placement
        self._launches += 1
        key = f"{self._run_tag}/job{index}#{self._launches}"
        by_agent: dict[int, list[NodeKey]] = {}
        for k in p.nodes:
            by_agent.setdefault(self._agent_of[(p.gpu_type, k)], []).append((p.gpu_type, k))
        agents = list(by_agent)  # leader (the placement's first node) first
        pause_s = max(0.0, rec.resume_at_s - led.now_s) if rec.status is JobStatus.PAUSED else 0.0
        wait, holds = None, []
        for n, a in enumerate(agents):
            spec = LaunchSpec(
                key=key,
                index=index,
                nodes=tuple(by_agent[a]),
                gpus_per_node=p.gpus_per_node,
                leader=n == 0,
                iterations=rec.job.iterations,
                progress_iters=rec.progress_iters,
                iter_time_s=rec.iter_time_s,
                pause_s=pause_s,
                time_scale=self.config.time_scale,
                checkpoint_every_s=self.config.checkpoint_every_s,
                checkpoint_dir=str(self.checkpoint_dir),
            )
            handle = self.slots[a].handle
            if n == 0:
                wait = handle.run.remote(spec)  # returns when the run finishes or stops
            else:
                holds.append(handle.hold.remote(spec))
        self._gangs[index] = _Gang(key, agents, wait)
        with contextlib.suppress(*_agent_gone()):  # a dead agent is reported by its sentinel
            ray.get(holds)  # a member that cannot take its GPUs is a bug: fail loudly
