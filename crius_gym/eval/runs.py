"""Run rule-based policies over traces with the same seeds, on fresh simulators."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from tqdm import tqdm

from crius_gym.eval.resume import RunStore, policy_source_digest
from crius_gym.perf.tuner import Tuner
from crius_gym.plugins import make_policy
from crius_gym.scenarios import Scenario
from crius_gym.sim.policy import Policy
from crius_gym.sim.simulator import RunResult
from crius_gym.workload.job import Trace


def run_policies(
    scenario: Scenario,
    traces: Sequence[Trace],
    policies: Sequence[str],
    *,
    seed: int = 0,
    horizon_s: float | None = None,
    ground_truth: str | None = None,
    data_dir: str | Path | None = None,
    tuner: Tuner | None = None,
    progress: bool = True,
    policy_factory: Callable[[str], Policy] | None = None,
    store: RunStore | None = None,
) -> list[RunResult]:
    """Every policy on every trace (policy-major order), same seed for all.

    Args:
        scenario: cluster and settings.
        traces: the traces.
        policies: policy names (the scenario's definitions, the registry, or plug-ins:
            ``module:Class``, ``file.py:Class``, entry points; :mod:`crius_gym.plugins`).
        seed: seeds each policy's random generator.
        horizon_s: optional stop time per run.
        ground_truth: override of the scenario's ground truth.
        data_dir: public data directory (measured ground truth).
        tuner: a tuner to share across runs (its cache is reused).
        progress: show a progress bar of finished jobs per run.
        policy_factory: builds a policy from a name (default:
            :func:`crius_gym.plugins.make_policy` with the scenario).
        store: runs an interrupted call with the same output folder finished are taken from
            it, and each new one is stored as it finishes (the default factory only: a custom
            one may build other policies under the same names).
    """
    tuner = tuner or scenario.make_tuner(ground_truth, data_dir)
    sim = scenario.make_simulator(tuner, ground_truth, data_dir)

    def from_scenario(name: str) -> Policy:
        return make_policy(name, scenario=scenario)

    make = policy_factory or from_scenario
    out = []
    keyed = store is not None and policy_factory is None
    for name in policies:
        for trace in traces:
            key = ""
            if keyed:
                assert store is not None
                key = store.key(
                    "run",
                    scenario,
                    name,
                    policy_source_digest(name),
                    trace,
                    seed,
                    horizon_s,
                    ground_truth,
                    str(data_dir),
                )
                if (hit := store.get(key)) is not None:
                    out.append(hit)
                    continue
            policy = make(name)
            bar = tqdm(
                total=len(trace.jobs),
                desc=f"{name} on {trace.name}",
                unit="job",
                disable=not progress,
                leave=False,
            )

            def update(done: int, total: int, bar: tqdm = bar) -> None:
                bar.update(done - bar.n)

            out.append(
                sim.run(
                    trace,
                    policy,
                    seed=seed,
                    horizon_s=horizon_s,
                    on_progress=update,
                )
            )
            bar.close()
            if keyed:
                assert store is not None
                store.put(key, out[-1])
    return out
