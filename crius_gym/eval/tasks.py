"""Evaluation runs as picklable tasks, executed serially or fanned out over Ray workers.

A task names everything its run needs (scenario, trace, policy, seed); :func:`execute` rebuilds
the rest, so a task gives the same result in this process or on any Ray worker. ``run_tasks``
keeps the input order, so serial and parallel evaluation produce identical tables, and with a
:class:`~crius_gym.eval.resume.RunStore` an interrupted evaluation resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crius_gym.eval.resume import RunStore, file_digest, policy_source_digest
from crius_gym.rl.envelope import Envelope
from crius_gym.sim.simulator import RunResult
from crius_gym.workload.job import Trace


@dataclass(frozen=True)
class HeuristicTask:
    """A heuristic on a trace, run on the simulator.

    Attributes:
        policy: its name: registered, the scenario's, or a plug-in (``module:Class``,
            ``file.py:Class``, an entry point; resolved again on a Ray worker, so a plug-in's
            module must be importable there too).
        scenario: scenario name or path.
        trace: the trace.
        seed: seed of the policy's generator.
        ground_truth: override of the scenario's ground truth.
        data_dir: public data directory (measured ground truth).
        horizon_s: optional stop time.
        options: keyword options of the policy's factory, as (key, value) pairs (over the
            scenario's definition of the name, if any).
    """

    policy: str
    scenario: str
    trace: Trace
    seed: int = 0
    ground_truth: str | None = None
    data_dir: str | None = None
    horizon_s: float | None = None
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        """Name in result tables."""
        return self.policy


@dataclass(frozen=True)
class AgentTask:
    """A saved PPO policy on a trace, run through the env with its action mask.

    Attributes:
        label: name in result tables (e.g. ``ppo:<run>``).
        model_path: the saved model.
        scenario: scenario name or path.
        env_config: the env settings the policy was trained with.
        trace: the trace.
        seed: env seed.
        deterministic: take the most likely action.
        guide_margin: the deterministic actor departs from the guide only where it prefers its
            own action by at least this many logits (0: plain argmax; see
            :mod:`crius_gym.rl.deviation`).
        envelope: its envelope: where more jobs wait or run, the guide decides (None: none).
        gym_id: for a model saved without ``metadata.yaml`` (plain SB3), the registered env id
            it was trained on (:func:`crius_gym.rl.saved.plain_metadata`).
    """

    label: str
    model_path: str
    scenario: str
    env_config: dict[str, Any] = field(default_factory=dict)
    trace: Trace | None = None
    seed: int = 0
    deterministic: bool = True
    guide_margin: float = 0.0
    envelope: Envelope | None = None
    gym_id: str | None = None


Task = HeuristicTask | AgentTask


@dataclass(frozen=True)
class TaskResult:
    """A task's run and its side numbers.

    Attributes:
        result: the run (policy field = the task's label).
        invalid_actions: invalid actions of an agent (0 for heuristics).
        wall_s: wall time of the run (simulation included; loading excluded), for the
            decision latency of the tables (``wall_s / result.summary.decisions``).
    """

    result: RunResult
    invalid_actions: int = 0
    wall_s: float = 0.0


def execute(task: Task) -> TaskResult:
    """Run one task (in this process)."""
    import torch

    from crius_gym.scenarios import load_scenario

    torch.set_num_threads(1)
    scenario = load_scenario(task.scenario)
    if isinstance(task, HeuristicTask):
        from crius_gym.eval.runs import run_policies  # the one heuristic runner
        from crius_gym.plugins import make_policy

        options = dict(task.options)

        tuner = scenario.make_tuner(task.ground_truth, task.data_dir)  # outside the timing
        t0 = time.perf_counter()
        (res,) = run_policies(
            scenario,
            [task.trace],
            [task.policy],
            seed=task.seed,
            horizon_s=task.horizon_s,
            ground_truth=task.ground_truth,
            data_dir=task.data_dir,
            tuner=tuner,
            progress=False,
            policy_factory=lambda name: make_policy(name, scenario=scenario, **options),
        )
        return TaskResult(res, wall_s=time.perf_counter() - t0)
    from crius_gym.env.cluster_env import CriusEnv
    from crius_gym.env.config import EnvConfig
    from crius_gym.rl.agent import run_model
    from crius_gym.rl.saved import load_policy

    # Evaluation runs whole traces: the decision cap guards training episodes only, and a
    # truncated run would average over the jobs that happened to finish.
    cfg = EnvConfig(**{**task.env_config, "max_decisions": 10**12})
    env = CriusEnv(scenario, cfg)
    model, _ = load_policy(Path(task.model_path), env, task.gym_id)
    assert task.trace is not None
    t0 = time.perf_counter()
    res, invalid = run_model(
        model, env, task.trace, task.deterministic, task.seed, task.guide_margin, task.envelope
    )
    return TaskResult(
        dataclasses.replace(res, policy=task.label), invalid, time.perf_counter() - t0
    )


def task_key(task: Task, store: RunStore) -> str:
    """The key of a task's run: the task, the saved model's bytes for an agent, the code."""
    if isinstance(task, AgentTask):
        return store.key("task", task, file_digest(task.model_path))
    return store.key("task", task, policy_source_digest(task.policy))


def run_tasks(
    tasks: Sequence[Task],
    use_ray: bool = False,
    address: str | None = None,
    on_done: Callable[[int, int], None] | None = None,
    store: RunStore | None = None,
) -> list[TaskResult]:
    """Execute tasks, serially or as Ray tasks (one CPU each); results in input order.

    Args:
        tasks: the runs.
        use_ray: fan out over Ray workers (needs the ``ray`` extra).
        address: an existing Ray cluster (default: start a private local one, even when
            ``$RAY_ADDRESS`` is set or a cluster runs on the machine).
        on_done: progress callback ``(done, total)``.
        store: finished runs of an earlier, interrupted call with the same output folder are
            taken from it, and each new one is stored as soon as it finishes.
    """
    keys = [task_key(t, store) for t in tasks] if store is not None else []
    found: dict[int, TaskResult] = {}
    if store is not None:
        for i, key in enumerate(keys):
            if (hit := store.get(key)) is not None:
                found[i] = hit
    todo = [i for i in range(len(tasks)) if i not in found]
    if on_done and found:
        on_done(len(found), len(tasks))

    def keep(i: int, res: TaskResult) -> None:
        found[i] = res
        if store is not None:
            store.put(keys[i], res)
        if on_done:
            on_done(len(found), len(tasks))

    if not use_ray or not todo:
        for i in todo:
            keep(i, execute(tasks[i]))
        return [found[i] for i in range(len(tasks))]
    import ray

    started = not ray.is_initialized()
    if started:
        # "local" starts a private Ray instance: without it Ray joins $RAY_ADDRESS or any
        # cluster running on the machine.
        ray.init(address=address or "local", include_dashboard=False, log_to_driver=False)
    try:
        remote = ray.remote(num_cpus=1)(execute)
        index = {remote.remote(tasks[i]): i for i in todo}
        pending = list(index)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                keep(index[ref], ray.get(ref))
        return [found[i] for i in range(len(tasks))]
    finally:
        if started:
            ray.shutdown()
