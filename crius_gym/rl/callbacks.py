"""Training callbacks: scheduling metrics, validation against Crius, progress.

Checkpoints have their own module, :mod:`crius_gym.rl.checkpoints`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from stable_baselines3.common.callbacks import BaseCallback
from tqdm import tqdm

from crius_gym.atomic import atomic_path, atomic_write_text
from crius_gym.env.cluster_env import CriusEnv
from crius_gym.rl.agent import run_model
from crius_gym.sim.simulator import RunResult
from crius_gym.stats import mean_ci
from crius_gym.workload.job import Trace

EPISODE_KEYS = (
    "avg_jct_s",
    "avg_queueing_s",
    "avg_throughput",
    "finished",
    "unfinished",
    "rejected",
    "makespan_s",
)


class HParamsCallback(BaseCallback):
    """Logs the run's resolved hyperparameters to TensorBoard's HPARAMS tab at the start.

    Nested values (``env``, ``policy_kwargs``) are flattened to ``env.episode_jobs`` etc.;
    lists become strings. The metric shown beside them is the validation JCT ratio to Crius.

    Args:
        hyperparams: the resolved hyperparameters (``PPOHyperparams.as_dict()``).
    """

    def __init__(self, hyperparams: dict[str, Any]) -> None:
        super().__init__()
        self.hyperparams = hyperparams

    @staticmethod
    def flatten(values: dict[str, Any], prefix: str = "") -> dict[str, float | int | str | bool]:
        """Scalars TensorBoard accepts, with dotted keys for nested mappings."""
        out: dict[str, float | int | str | bool] = {}
        for k, v in values.items():
            key = f"{prefix}{k}"
            if isinstance(v, dict):
                out.update(HParamsCallback.flatten(v, f"{key}."))
            elif isinstance(v, bool | int | float | str):
                out[key] = v
            else:
                out[key] = str(v)
        return out

    def _on_training_start(self) -> None:
        from stable_baselines3.common.logger import HParam

        self.logger.record(
            "hparams",
            HParam(self.flatten(self.hyperparams), {"eval/jct_vs_crius": 0.0}),
            exclude=("stdout", "log", "json", "csv"),
        )

    def _on_step(self) -> bool:
        return True


class SchedMetricsCallback(BaseCallback):
    """Logs the scheduling metrics of finished training episodes under ``sched/``."""

    def __init__(self) -> None:
        super().__init__()
        self._episodes: list[dict[str, float]] = []

    def _on_step(self) -> bool:
        for info, done in zip(self.locals["infos"], self.locals["dones"], strict=True):
            if done and "episode_metrics" in info:
                m = dict(info["episode_metrics"])
                m["invalid_actions"] = info.get("invalid_actions", 0)
                self._episodes.append(m)
        return True

    def _on_rollout_end(self) -> None:
        if not self._episodes:
            return
        for key in (*EPISODE_KEYS, "invalid_actions"):
            vals = [float(e[key]) for e in self._episodes if not math.isnan(float(e[key]))]
            if vals:
                self.logger.record(f"sched/{key}", float(np.mean(vals)))
        self.logger.record("sched/episodes", len(self._episodes))
        self._episodes = []


def mean_metric(results: Sequence[RunResult], key: str) -> float:
    """Mean over runs of a summary field (NaN-aware)."""
    vals = [float(getattr(r.summary, key)) for r in results]
    vals = [v for v in vals if not math.isnan(v)]
    return float(np.mean(vals)) if vals else math.nan


@dataclass(frozen=True)
class ValidationSet:
    """Validation traces of one scenario with the reference heuristic's results on them.

    Attributes:
        env: an evaluation env of the scenario (the training env settings, no decision cap).
        traces: validation traces.
        reference: the heuristic's results on the same traces (same order).
        name: the scenario's name (a column of ``evaluations.csv`` when there are several).
    """

    env: CriusEnv
    traces: tuple[Trace, ...]
    reference: tuple[RunResult, ...]
    name: str = ""


def paired_ratios(results: Sequence[RunResult], refs: Sequence[RunResult]) -> list[float]:
    """Per-trace ratios of average JCT to the reference's (traces with a finished job on both)."""
    return [
        r.summary.avg_jct_s / f.summary.avg_jct_s
        for r, f in zip(results, refs, strict=True)
        if f.summary.avg_jct_s > 0 and not math.isnan(r.summary.avg_jct_s)
    ]


def macro_score(per_set: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Mean over validation sets of their mean ratio, with a 95% half-width.

    Each set weighs the same, however many traces it has (16 traces of hetero-64 do not drown
    2 crowded 1,280-GPU traces); the half-width combines the sets' own half-widths as
    independent errors of a mean: sqrt(sum h_s^2) / S. With one set this is that set's
    (mean, half-width).

    Args:
        per_set: (mean ratio, 95% half-width) of each set.
    """
    if len(per_set) == 1:
        return per_set[0]
    means = [m for m, _ in per_set]
    halves = [0.0 if math.isnan(h) else h for _, h in per_set]
    return float(np.mean(means)), float(math.sqrt(sum(h * h for h in halves)) / len(per_set))


class ValidationCallback(BaseCallback):
    """Validates every ``eval_freq`` timesteps against a heuristic, keeping the best model.

    The policy runs masked and deterministic on every validation trace; the reference
    heuristic's results on the same traces are the comparison. The score of an evaluation is
    the paired ratio of average JCTs (agent / reference, per trace; scale-free) averaged over each
    validation set's traces, then over the sets, so that every validation scenario weighs the
    same (:func:`macro_score`; one set: the mean over its traces with its 95% CI). Each set's own
    mean is a column ``eval_jct_ratio[<scenario>]`` when there are several. The best model
    minimises (unfinished jobs, score), so a policy cannot look good by leaving work unfinished.

    Args:
        sets: the validation sets (one per validation scenario).
        eval_freq: timesteps between evaluations.
        save_dir: where ``best_model.zip`` and ``evaluations.csv`` go.
    """

    def __init__(self, sets: Sequence[ValidationSet], eval_freq: int, save_dir: Path) -> None:
        super().__init__()
        self.sets = list(sets)
        self.eval_freq = eval_freq
        self.save_dir = save_dir
        self.best: tuple[float, float] = (math.inf, math.inf)
        self.rows: list[dict[str, Any]] = []
        self._next = eval_freq

    def _init_callback(self) -> None:
        # The callback's own counter is synced only at the first step: read the model's, which
        # a resumed run brings back from its checkpoint.
        self._next = (self.model.num_timesteps // self.eval_freq + 1) * self.eval_freq
        path = self.save_dir / "evaluations.csv"
        if path.exists():  # a resumed run keeps its history and its best
            old = pd.read_csv(path)
            self.rows = old.to_dict("records")
            if len(old) and "eval_jct_ratio" in old:
                ok = old.sort_values(["eval_unfinished", "eval_jct_ratio"]).iloc[0]
                self.best = (float(ok["eval_unfinished"]), float(ok["eval_jct_ratio"]))

    def evaluate(self) -> dict[str, float]:
        """Run the current policy on every validation trace."""
        results: list[RunResult] = []
        refs: list[RunResult] = []
        invalid = 0
        per_set: dict[str, tuple[float, float]] = {}
        for k, vs in enumerate(self.sets):
            mine = []
            for trace in vs.traces:
                res, bad = run_model(self.model, vs.env, trace)  # type: ignore[arg-type]
                mine.append(res)
                invalid += bad
            results.extend(mine)
            refs.extend(vs.reference)
            per_set[vs.name or str(k)] = mean_ci(paired_ratios(mine, vs.reference))
        thr = [
            r.summary.avg_throughput / f.summary.avg_throughput
            for r, f in zip(results, refs, strict=True)
            if f.summary.avg_throughput > 0
        ]
        ratio, half = macro_score(list(per_set.values()))
        out = {
            "timesteps": float(self.num_timesteps),
            "eval_traces": float(len(results)),
            "eval_jct_ratio": ratio,
            "eval_jct_ratio_ci95": half,
            "eval_throughput_ratio": mean_ci(thr)[0],
            "eval_avg_jct_s": mean_metric(results, "avg_jct_s"),
            "eval_avg_queueing_s": mean_metric(results, "avg_queueing_s"),
            "eval_avg_throughput": mean_metric(results, "avg_throughput"),
            "eval_unfinished": float(sum(r.summary.unfinished for r in results)),
            "eval_invalid_actions": float(invalid),
            "ref_avg_jct_s": mean_metric(refs, "avg_jct_s"),
            "ref_avg_throughput": mean_metric(refs, "avg_throughput"),
        }
        if len(per_set) > 1:
            out.update({f"eval_jct_ratio[{name}]": m for name, (m, _) in per_set.items()})
        # Kept for the learning curves of earlier runs: the ratio of the means.
        out["eval_jct_vs_ref"] = out["eval_avg_jct_s"] / out["ref_avg_jct_s"]
        out["eval_throughput_vs_ref"] = out["eval_avg_throughput"] / out["ref_avg_throughput"]
        return out

    def _on_training_start(self) -> None:
        # The starting point (e.g. the warm start) on the curve; an exact resume from step 0
        # has it already.
        if self.model.num_timesteps == 0 and not any(r["timesteps"] == 0 for r in self.rows):
            self.num_timesteps = 0
            self._record()

    def _on_step(self) -> bool:
        if self.num_timesteps < self._next:
            return True
        self._next += self.eval_freq
        self._record()
        return True

    def _record(self) -> None:
        m = self.evaluate()
        for key, value in m.items():
            if key.startswith("eval_"):
                name = key[5:].replace("_vs_ref", "_vs_crius")
                self.logger.record(f"eval/{name}", value)
        self.logger.record("eval/crius_avg_jct_s", m["ref_avg_jct_s"])
        self.rows.append(m)
        with atomic_path(self.save_dir / "evaluations.csv") as tmp:
            pd.DataFrame(self.rows).to_csv(tmp, index=False)
        score = (m["eval_unfinished"], m["eval_jct_ratio"])
        if score < self.best:
            self.best = score
            with atomic_path(self.save_dir / "best_model.zip") as tmp:
                self.model.save(tmp)
            atomic_write_text(
                self.save_dir / "best.yaml", "".join(f"{k}: {v}\n" for k, v in m.items())
            )
        self.logger.dump(self.num_timesteps)


class ProgressCallback(BaseCallback):
    """A tqdm bar over timesteps."""

    def __init__(self, total: int, enabled: bool = True) -> None:
        super().__init__()
        self.total = total
        self.enabled = enabled
        self.bar: tqdm | None = None

    def _on_training_start(self) -> None:
        self.bar = tqdm(
            total=self.total,
            initial=min(self.num_timesteps, self.total),
            unit="step",
            desc="training",
            disable=not self.enabled,
        )

    def _on_step(self) -> bool:
        if self.bar is not None:
            # Whole-episode rollouts end past the total: the bar stops at 100%.
            self.bar.update(min(self.num_timesteps, self.total) - self.bar.n)
        return True

    def _on_training_end(self) -> None:
        if self.bar is not None:
            self.bar.close()
