"""What the Arena artifact's published numbers rest on: its setting, option by option.

The artifact setting (``envs/crius-sim-1280-artifact.yaml``) is a bundle of choices, each a named
switch here (:data:`OPTIONS`). :func:`ablation` runs Crius and FCFS with every option on, with
each one left out, with none, and with each one alone on top of none, so a reader sees what each
contributes. "None" is our own modelling on the same cluster, trace and data: the trace read
with ÷5 as the artifact reads it (our default reading; "none but divisor" is the old ÷1),
event-driven time, progress integrated at the speed of each Cell run, a real pause for tuning
and a 30 s checkpoint restore, the Arena measurements as truth where they exist (the estimator
elsewhere) while the schedulers decide on the estimator, and our Crius and FCFS.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from crius_gym.perf.tuner import Tuner
from crius_gym.policies.baselines import FCFS
from crius_gym.policies.crius import CriusOptions, CriusPolicy
from crius_gym.scenarios import Scenario
from crius_gym.sim.artifact_compat import ArtifactCompat
from crius_gym.sim.policy import Policy
from crius_gym.sim.simulator import RunResult
from crius_gym.workload.job import Trace

PolicyKind = Literal["crius", "fcfs"]

#: The authors' committed results, Philly, 2,000 rounds of 300 s (artifact commit 65573a2,
#: ``plot/*/crius_*.npy``; FCFS from a rerun of their simulator unchanged, as
#: ``docs/artifact_setting.md`` states):
#: finished jobs, average JCT of finished jobs (s), average throughput (samples/s).
AUTHORS: dict[str, tuple[int, float, float]] = {
    "crius": (828, 41_648.0, 6_771.0),
    "fcfs": (590, 83_192.0, 4_367.0),
}


@dataclass(frozen=True)
class Setting:
    """One combination of the options.

    Attributes:
        iteration_divisor: ``num_iteration`` divisor of the trace (artifact: 5).
        compat: the simulator's artifact-compatibility options.
        restore_s: checkpoint/restore pause of a (re)start with progress (artifact: 0).
        ground_truth: ``artifact-table`` (the artifact's oracle) or ``measured`` (ours).
        crius: option overrides of ``crius`` (:class:`~crius_gym.policies.crius.CriusOptions`),
            as sorted pairs; all of ``crius-artifact``'s = the artifact's Crius.
        fcfs: options of :class:`~crius_gym.policies.baselines.FCFS`.
    """

    iteration_divisor: int = 5
    compat: ArtifactCompat = field(default_factory=ArtifactCompat)
    restore_s: float = 30.0
    ground_truth: str = "measured"
    crius: tuple[tuple[str, bool], ...] = ()
    fcfs: tuple[tuple[str, bool], ...] = (
        ("auto_parallel", False),
        ("best_layout_only", False),
        ("per_type_fifo", False),
    )

    def with_fcfs(self, **options: bool) -> Setting:
        """The setting with some FCFS options changed."""
        return replace(self, fcfs=tuple(sorted({**dict(self.fcfs), **options}.items())))

    def with_crius(self, **options: bool) -> Setting:
        """The setting with some Crius options changed."""
        return replace(self, crius=tuple(sorted({**dict(self.crius), **options}.items())))

    def with_compat(self, **options: Any) -> Setting:
        """The setting with some simulator options changed."""
        return replace(self, compat=replace(self.compat, **options))


@dataclass(frozen=True)
class Option:
    """One modelling choice of the artifact.

    Attributes:
        key: short name.
        label: what it is, for tables.
        verdict: ``A-ref`` (an artefact of the reference), ``A-ours`` (a mismatch of ours when
            we claim the artifact's setting) or ``D`` (defensible either way); see
            ``docs/artifact_setting.md``.
        applies: the policies it changes (``both``, ``crius`` or ``fcfs``).
        on: turns it on.
        off: turns it off.
    """

    key: str
    label: str
    verdict: str
    applies: Literal["both", "crius", "fcfs"]
    on: Callable[[Setting], Setting]
    off: Callable[[Setting], Setting]


def _revalue_off(s: Setting) -> Setting:
    # The double count is defined on the re-valued books; without them it goes too.
    return s.with_compat(progress="integrate", suspend_double_count=False)


OPTIONS: tuple[Option, ...] = (
    Option(
        "divisor",
        "iterations ÷5 (simulator.py::_submit_jobs)",
        "A-ours",
        "both",
        lambda s: replace(s, iteration_divisor=5),
        lambda s: replace(s, iteration_divisor=1),
    ),
    Option(
        "rounds",
        "300 s rounds",
        "D",
        "both",
        lambda s: s.with_compat(rounds=True),
        lambda s: s.with_compat(rounds=False),
    ),
    Option(
        "revalue",
        "progress re-valued at the current speed",
        "A-ref",
        "both",
        lambda s: s.with_compat(progress="revalue"),
        _revalue_off,
    ),
    Option(
        "double_count",
        "suspension double count (with re-valuation)",
        "A-ref",
        "both",
        lambda s: s.with_compat(progress="revalue", suspend_double_count=True),
        lambda s: s.with_compat(suspend_double_count=False),
    ),
    Option(
        "tuning_charge",
        "tuning costs progress only beyond a round",
        "A-ref",
        "both",
        lambda s: s.with_compat(tuning_charge="artifact"),
        lambda s: s.with_compat(tuning_charge="pause"),
    ),
    Option(
        "free_restore",
        "free checkpoint/restore (CKPT_RESUME_OVERHEAD = 0)",
        "D",
        "both",
        lambda s: replace(s, restore_s=0.0),
        lambda s: replace(s, restore_s=30.0),
    ),
    Option(
        "oracle_table",
        "oracle table as truth and as the schedulers' view",
        "D",
        "both",
        lambda s: replace(s, ground_truth="artifact-table"),
        lambda s: replace(s, ground_truth="measured"),
    ),
    Option(
        "crius_upgrades",
        "Crius upgrades after arrivals too, on any gain",
        "D",
        "crius",
        lambda s: s.with_crius(upgrade_on_arrivals=True, charge_pause=False),
        lambda s: s.with_crius(upgrade_on_arrivals=False, charge_pause=True),
    ),
    Option(
        "crius_all_cells",
        "Crius prices every profiled Cell, also those the tuner pruned",
        "D",
        "crius",
        lambda s: s.with_crius(tuner_cells=False),
        lambda s: s.with_crius(tuner_cells=True),
    ),
    Option(
        "per_type_fifo",
        "FCFS: one FIFO queue per GPU type",
        "A-ours",
        "fcfs",
        lambda s: s.with_fcfs(per_type_fifo=True),
        lambda s: s.with_fcfs(per_type_fifo=False),
    ),
    Option(
        "optimal_plan",
        "FCFS: tuned optimal plan, full tuning charge, no DP-memory rejection",
        "A-ours",
        "fcfs",
        lambda s: s.with_fcfs(auto_parallel=True),
        lambda s: s.with_fcfs(auto_parallel=False),
    ),
    Option(
        "best_layout",
        "FCFS: best locality only",
        "D",
        "fcfs",
        lambda s: s.with_fcfs(best_layout_only=True),
        lambda s: s.with_fcfs(best_layout_only=False),
    ),
)


def none_setting() -> Setting:
    """Every option off but the divisor: our modelling on the artifact's cluster, trace and data.

    The trace stays read with ÷5, as the artifact's simulator reads it and as our reader does by
    default: the division corrects how the trace is read, it is not a modelling choice.
    """
    s = Setting()
    for opt in OPTIONS:
        s = opt.off(s)
    return replace(s, iteration_divisor=5)


def all_setting() -> Setting:
    """Every option on: the artifact's setting."""
    s = none_setting()
    for opt in OPTIONS:
        s = opt.on(s)
    return s


def scenario_setting(scenario: Scenario) -> Setting:
    """The setting a scenario file describes (its artifact options and policy definitions)."""
    crius = scenario.policy_spec("crius")
    fcfs = scenario.policy_spec("fcfs")
    s = Setting(
        iteration_divisor=scenario.workload.iteration_divisor or 1,
        compat=scenario.sim.artifact_compat,
        restore_s=scenario.sim.checkpoint_restore_s,
        ground_truth=scenario.ground_truth,
    )
    if crius is not None and crius.policy == "crius-artifact":
        s = s.with_crius(upgrade_on_arrivals=True, charge_pause=False, tuner_cells=False)
    if fcfs is not None and fcfs.policy == "fcfs-artifact":
        s = s.with_fcfs(auto_parallel=True, best_layout_only=True, per_type_fifo=True)
    return s


def applied(base: Scenario, setting: Setting) -> Scenario:
    """The scenario with a setting's simulator, truth and workload options."""
    sim = replace(base.sim, checkpoint_restore_s=setting.restore_s, artifact_compat=setting.compat)
    workload = replace(base.workload, iteration_divisor=setting.iteration_divisor)
    return replace(base, sim=sim, ground_truth=setting.ground_truth, workload=workload)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Variant:
    """A row of the ablation: which options are on, as a label and a setting."""

    group: str  # "all", "all but", "none", "none plus"
    option: str  # option key ("" for all / none)
    setting: Setting


def variants(kind: PolicyKind) -> Iterator[Variant]:
    """All, all but each option, none, none at ÷1, and none plus each other option.

    Only the options that apply to ``kind`` are varied.
    """
    mine = [o for o in OPTIONS if o.applies in ("both", kind)]
    yield Variant("all", "", all_setting())
    for o in mine:
        yield Variant("all but", o.key, o.off(all_setting()))
    yield Variant("none", "", none_setting())
    for o in mine:
        if o.key == "divisor":
            yield Variant("none but", o.key, o.off(none_setting()))
        else:
            yield Variant("none plus", o.key, o.on(none_setting()))


class Runner:
    """Runs settings on one scenario, sharing tuners (per truth) and traces (per divisor).

    Args:
        base: the scenario (cluster, trace, splits); its own options are overridden.
        horizon_s: stop time of every run.
        data_dir: public data directory.
        trace: an explicit trace to run instead of the scenario's (for tests).
    """

    def __init__(
        self,
        base: Scenario,
        horizon_s: float | None,
        data_dir: str | Path | None = None,
        trace: Trace | None = None,
    ) -> None:
        self.base = base
        self.horizon_s = horizon_s
        self.data_dir = data_dir
        self._trace = trace
        self._tuners: dict[str, Tuner] = {}
        self._traces: dict[int, Trace] = {}

    def trace(self, setting: Setting) -> Trace:
        """The trace as the setting reads it."""
        if self._trace is not None:
            return self._trace
        d = setting.iteration_divisor
        if d not in self._traces:
            self._traces[d] = applied(self.base, setting).own_trace(self.data_dir)
        return self._traces[d]

    def run(self, setting: Setting, kind: PolicyKind, seed: int = 0) -> RunResult:
        """One run of Crius or FCFS under a setting."""
        sc = applied(self.base, setting)
        if setting.ground_truth not in self._tuners:
            self._tuners[setting.ground_truth] = sc.make_tuner(data_dir=self.data_dir)
        tuner = self._tuners[setting.ground_truth]
        sim = sc.make_simulator(tuner, data_dir=self.data_dir)
        sim.config = dataclasses.replace(sim.config, record_timeseries=True)
        f = dict(setting.fcfs)
        policy: Policy = (
            CriusPolicy(CriusOptions(**dict(setting.crius)))
            if kind == "crius"
            else FCFS(f["auto_parallel"], f["per_type_fifo"], f["best_layout_only"])
        )
        policy.name = kind
        return sim.run(self.trace(setting), policy, seed=seed, horizon_s=self.horizon_s)


def run_metrics(result: RunResult) -> dict[str, float]:
    """The numbers the ablation reports for one run.

    ``credited_pct`` is the work the books credit (iterations done × batch, every job) as a
    percentage of the work the GPUs processed (∫ Σ samples/s dt): above 100 is work no
    throughput paid for (re-valuation), below 100 is work lost (iterating past the end of a job
    to the round's boundary, progress taken back by a shrink).
    """
    s = result.summary
    credited = sum(min(j.progress_iters, j.iterations) * j.global_batch for j in result.jobs)
    processed = s.avg_throughput * s.makespan_s
    return {
        "finished": s.finished,
        "avg_jct_s": s.avg_jct_s,
        "avg_throughput": s.avg_throughput,
        "gpu_util": s.avg_gpu_utilization,
        "reconfigurations": s.reconfigurations,
        "preemptions": s.preemptions,
        "rejected": s.rejected,
        "credited_pct": 100.0 * credited / processed if processed > 0 else float("nan"),
    }


def versus_authors(kind: PolicyKind, metrics: dict[str, float]) -> dict[str, float]:
    """Relative differences (%) from the authors' finished / JCT / throughput."""
    fin, jct, thr = AUTHORS[kind]
    return {
        "finished_vs_authors_pct": 100.0 * (metrics["finished"] / fin - 1),
        "jct_vs_authors_pct": 100.0 * (metrics["avg_jct_s"] / jct - 1),
        "throughput_vs_authors_pct": 100.0 * (metrics["avg_throughput"] / thr - 1),
    }


def ablation(
    runner: Runner,
    kinds: Sequence[PolicyKind] = ("crius", "fcfs"),
    on_run: Callable[[str, Variant], None] | None = None,
) -> list[dict[str, Any]]:
    """Every variant of every policy kind, as table rows (see :func:`variants`)."""
    labels = {o.key: o.label for o in OPTIONS}
    verdicts = {o.key: o.verdict for o in OPTIONS}
    rows = []
    for kind in kinds:
        for v in variants(kind):
            if on_run is not None:
                on_run(kind, v)
            m = run_metrics(runner.run(v.setting, kind))
            rows.append(
                {
                    "policy": kind,
                    "group": v.group,
                    "option": v.option,
                    "label": labels.get(v.option, ""),
                    "verdict": verdicts.get(v.option, ""),
                    **m,
                    **versus_authors(kind, m),
                }
            )
    return rows
