"""A scenario: a cluster, a workload, simulator settings and train/validation/test splits.

The file format and its validation are in :mod:`crius_gym.scenarios.loader`; this module is
what a loaded scenario is and what it builds (tuner, ground truth, simulator, traces).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from crius_gym.errors import ConfigError, UnknownNameError
from crius_gym.hardware.cluster import ClusterSpec
from crius_gym.perf.calibration import get_calibration
from crius_gym.perf.estimator import Estimator
from crius_gym.perf.framework import get_framework
from crius_gym.perf.tuner import Tuner, TunerConfig, layouts_for
from crius_gym.sim.simulator import SimConfig, Simulator
from crius_gym.sim.truth import ArtifactTableTruth, EstimatorTruth, GroundTruth, MeasuredTruth
from crius_gym.workload.job import Job, Trace
from crius_gym.workload.synthetic import (
    SyntheticConfig,
    generate,
    interarrival_for_load,
    split_rng,
)

Split = Literal["train", "val", "test"]
GroundTruthKind = Literal["estimator", "measured", "artifact-table"]
GROUND_TRUTHS: tuple[str, ...] = ("estimator", "measured", "artifact-table")


@dataclass(frozen=True)
class SplitSpec:
    """How traces are split.

    Attributes:
        seed: root seed of every synthetic trace of the scenario.
        train_episode_jobs: jobs per training episode (a fresh synthetic trace each).
        validation_traces: synthetic validation traces.
        test_traces: synthetic test traces.
    """

    seed: int = 0
    train_episode_jobs: int = 60
    validation_traces: int = 4
    test_traces: int = 8

    def __post_init__(self) -> None:
        lowest = {"seed": 0, "train_episode_jobs": 1, "validation_traces": 0, "test_traces": 0}
        for name, low in lowest.items():
            value = getattr(self, name)
            # bool is an int subclass: 'true' would pass as 1 silently.
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"splits.{name} must be an integer >= {low}, got {value!r}")


@dataclass(frozen=True)
class WorkloadSpec:
    """A scenario's workload.

    Attributes:
        synthetic: generator settings (arrival gap overridden by ``load`` when set).
        load: offered load of synthetic traces (fraction of the cluster's GPU-seconds).
        trace: an Arena trace name (``philly``, ``venus``, ``pai``, ``testbed``) or CSV path.
        iteration_divisor: floor-divide the trace's iterations by this (None: the artifact's
            convention, :func:`crius_gym.workload.arena_trace.arena_iteration_divisor`).
    """

    synthetic: SyntheticConfig = field(default_factory=SyntheticConfig)
    load: float | None = None
    trace: str | None = None
    iteration_divisor: int | None = None

    def __post_init__(self) -> None:
        if self.load is not None and not 0 < self.load <= 4:
            raise ConfigError("workload.load must be in (0, 4]")
        d = self.iteration_divisor
        if d is not None and (isinstance(d, bool) or not isinstance(d, int) or d < 1):
            raise ConfigError(f"workload.iteration_divisor must be an integer >= 1, got {d!r}")


@dataclass(frozen=True)
class PolicySpec:
    """What a policy name means in a scenario: a registered policy with option overrides.

    Attributes:
        policy: registered policy name (``crius_gym.policies.registry``).
        options: keyword overrides passed to its factory, as sorted (key, value) pairs.
    """

    policy: str
    options: tuple[tuple[str, Any], ...] = ()

    def __str__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options)
        return f"{self.policy}({opts})" if opts else self.policy


@dataclass(frozen=True)
class Scenario:
    """A loaded scenario (see the module docstring for the file format).

    Attributes:
        name: identifier.
        description: free text.
        cluster: the cluster.
        framework: estimator framework.
        tuner: tuner settings.
        sim: simulator settings.
        ground_truth: ``estimator``, ``measured`` or ``artifact-table``.
        workload: workload settings.
        splits: split settings.
        policies: policy names this scenario redefines (name → registered policy and options),
            as sorted pairs; every other name is the registry's.
        mix: for a mixture, its components and their weights (empty otherwise).
        path: the file it came from ("" when built in code).
    """

    name: str
    description: str
    cluster: ClusterSpec
    framework: str = "alpa"
    tuner: TunerConfig = field(default_factory=TunerConfig)
    sim: SimConfig = field(default_factory=SimConfig)
    ground_truth: GroundTruthKind = "estimator"
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    splits: SplitSpec = field(default_factory=SplitSpec)
    policies: tuple[tuple[str, PolicySpec], ...] = ()
    mix: tuple[tuple[Scenario, float], ...] = ()
    path: str = ""
    _memo: dict[str, float] = field(default_factory=dict, compare=False, repr=False)

    # ------------------------------------------------------------------ building blocks
    def make_tuner(
        self, ground_truth: str | None = None, data_dir: str | Path | None = None
    ) -> Tuner:
        """A fresh tuner (with an empty cache) for the scenario's cluster.

        Under the ``artifact-table`` ground truth (the scenario's, or ``ground_truth``) the
        tuner's prices are the artifact's table, read from the public data directory.
        """
        est = Estimator(get_framework(self.framework), get_calibration(self.framework))
        kind = ground_truth or self.ground_truth
        if kind == "artifact-table":
            from crius_gym.perf.artifact_table import ArtifactTable, TableTuner
            from crius_gym.perf.public_tables import load_public_measurements

            capacity = {g.gpu_type: g.gpus_per_node for g in self.cluster.groups}
            table = ArtifactTable(load_public_measurements(data_dir), capacity)
            return TableTuner(self.cluster, est, table, self.tuner)
        return Tuner(self.cluster, est, self.tuner)

    def make_truth(
        self, tuner: Tuner, ground_truth: str | None = None, data_dir: str | Path | None = None
    ) -> GroundTruth:
        """The ground truth (``ground_truth`` overrides the scenario's).

        Raises:
            UnknownNameError: an unknown kind.
            ConfigError: ``artifact-table`` with a tuner not made by :meth:`make_tuner` for it.
        """
        kind = ground_truth or self.ground_truth
        if kind == "estimator":
            return EstimatorTruth(tuner)
        if kind == "measured":
            from crius_gym.perf.public_tables import load_public_measurements

            return MeasuredTruth(tuner, load_public_measurements(data_dir))
        if kind == "artifact-table":
            return ArtifactTableTruth(tuner)
        raise UnknownNameError("ground truth", kind, GROUND_TRUTHS)

    def make_simulator(
        self,
        tuner: Tuner | None = None,
        ground_truth: str | None = None,
        data_dir: str | Path | None = None,
    ) -> Simulator:
        """A simulator of the scenario's cluster."""
        tuner = tuner or self.make_tuner(ground_truth, data_dir)
        return Simulator(
            self.cluster, tuner, self.make_truth(tuner, ground_truth, data_dir), self.sim
        )

    # ------------------------------------------------------------------ workloads
    def synthetic_config(self, tuner: Tuner | None = None) -> SyntheticConfig:
        """Generator settings with the arrival gap set from ``workload.load`` (if given)."""
        load = self.workload.load
        cfg = self.workload.synthetic
        if load is None:
            return cfg
        if "job_gpu_s" not in self._memo:  # deterministic, so computed once per scenario
            self._memo["job_gpu_s"] = _mean_job_gpu_seconds(self, tuner or self.make_tuner())
        gap = interarrival_for_load(load, self.cluster.num_gpus, self._memo["job_gpu_s"])
        return dataclasses.replace(cfg, mean_interarrival_s=gap)

    def synthetic_trace(
        self, split: Split, index: int, num_jobs: int | None = None, tuner: Tuner | None = None
    ) -> Trace:
        """Synthetic trace ``index`` of a split (deterministic)."""
        cfg = self.synthetic_config(tuner)
        if num_jobs is not None:
            cfg = dataclasses.replace(cfg, num_jobs=num_jobs)
        rng = split_rng(self.splits.seed, split, index)
        return generate(cfg, rng, self.cluster.gpu_types, name=f"{self.name}-{split}-{index}")

    def held_out_traces(
        self, split: Literal["val", "test"], tuner: Tuner | None = None
    ) -> list[Trace]:
        """The synthetic validation or test traces."""
        count = self.splits.validation_traces if split == "val" else self.splits.test_traces
        tuner = tuner or self.make_tuner()
        return [self.synthetic_trace(split, i, tuner=tuner) for i in range(count)]

    def own_trace(self, data_dir: str | Path | None = None, tuner: Tuner | None = None) -> Trace:
        """The scenario's own workload: its named trace, else synthetic test trace 0.

        A ``workload.trace`` that is not a public Arena trace's name is a file in any format
        :func:`crius_gym.scenarios.trace_files.read_trace` detects.
        """
        ref = self.workload.trace
        if ref is None:
            return self.synthetic_trace("test", 0, tuner=tuner)
        from crius_gym import datasets
        from crius_gym.scenarios.trace_files import read_trace
        from crius_gym.workload.arena_trace import load_arena_trace

        divisor = self.workload.iteration_divisor
        if ref in datasets.ARENA_TRACES:
            return load_arena_trace(ref, data_dir, iteration_divisor=divisor)
        return read_trace(ref, tuner=tuner or self.make_tuner(), iteration_divisor=divisor)

    def mix_component(self, index: int) -> int:
        """The component of training episode ``index`` of a mixture (0 for a plain scenario)."""
        if not self.mix:
            return 0
        weights = np.array([w for _, w in self.mix], dtype=float)
        # Entropy (seed, 98, index): a stream of its own, disjoint from every split's.
        rng = np.random.default_rng(np.random.SeedSequence((self.splits.seed, 98, index)))
        return int(rng.choice(len(weights), p=weights / weights.sum()))

    def policy_spec(self, name: str) -> PolicySpec | None:
        """What ``name`` means in this scenario (None: the registry's policy of that name)."""
        return dict(self.policies).get(name)


def requested_demand(tuner: Tuner, job: Job) -> tuple[float, float] | None:
    """A job's (GPU-seconds, run seconds) on its requested GPUs, its best Cell otherwise.

    The requested type and count at the layout with the fewest nodes that admits a plan; the
    tuner's best Cell when the request is absent or admits none. None: the job fits nowhere.
    """
    res = tuner.tune(job.model, job.global_batch)
    if not res.feasible:
        return None
    best = res.candidates[0]
    run_s, gpus = job.iterations * best.iter_time_s, best.num_gpus
    t, n = job.requested_gpu_type, job.requested_gpus
    if t in tuner.cluster.gpu_types and n:
        for lay in layouts_for(tuner.cluster.group(t), n):
            est = tuner.best_in_layout(job.model, job.global_batch, t, lay)
            if est is not None:
                run_s, gpus = job.iterations * est.iter_time_s, n
                break
    return run_s * gpus, run_s


def _mean_job_gpu_seconds(scenario: Scenario, tuner: Tuner, sample: int = 400) -> float:
    """Mean GPU-seconds of a synthetic job on its requested GPUs (its best Cell otherwise)."""
    cfg = dataclasses.replace(scenario.workload.synthetic, num_jobs=sample)
    # Entropy (seed, 99, 0): split ids are 0-2, so this stream is disjoint from every split.
    rng = np.random.default_rng(np.random.SeedSequence((scenario.splits.seed, 99, 0)))
    trace = generate(cfg, rng, scenario.cluster.gpu_types)
    total = [d[0] for d in (requested_demand(tuner, j) for j in trace.jobs) if d is not None]
    if not total:
        raise ConfigError(f"scenario {scenario.name}: no synthetic job fits the cluster")
    return float(np.mean(total))


# ---------------------------------------------------------------------------- loading
