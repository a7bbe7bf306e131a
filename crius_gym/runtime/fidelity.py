"""Simulator against runtime: the same jobs and policies on both, side by side in Markdown."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from crius_gym.provenance import Provenance
from crius_gym.sim.simulator import RunResult


def _pct(a: float, b: float) -> str:
    return "n/a" if not b else f"{100.0 * (a - b) / b:+.2f}%"


def same_placements(a: RunResult, b: RunResult) -> float:
    """Share of jobs that ended on the same GPU type and count in both runs."""
    pairs = list(zip(a.jobs, b.jobs, strict=True))
    same = sum(x.gpu_type == y.gpu_type and x.num_gpus == y.num_gpus for x, y in pairs)
    return same / len(pairs) if pairs else 1.0


def decision_agreement(a: RunResult, b: RunResult) -> tuple[int, int, float | None]:
    """How long two runs placed jobs alike, in the order their holds began.

    Compares the sequence of placements (job, GPU type, nodes, GPUs per node) sorted by start.

    Returns:
        ``(same, total, diverged_at_s)``: the length of the common prefix, the longer sequence's
        length, and the first run's start time of the first differing placement (None if the
        sequences are equal).
    """

    def seq(r: RunResult) -> list[tuple[float, tuple[int, str, tuple[int, ...], int]]]:
        return sorted(
            (s.start_s, (s.job_index, s.gpu_type, s.nodes, s.gpus_per_node)) for s in r.segments
        )

    x, y = seq(a), seq(b)
    same = 0
    for (_, u), (_, v) in zip(x, y, strict=False):
        if u != v:
            break
        same += 1
    total = max(len(x), len(y))
    if same == total:
        return same, total, None
    return same, total, (x[same][0] if same < len(x) else y[same][0])


def fidelity_markdown(
    runtime: Sequence[RunResult],
    sim: Sequence[RunResult],
    stats: Sequence[Mapping[str, object]],
    prov: Provenance,
    options: Mapping[str, object],
    memory_mb: float,
) -> str:
    """The comparison report (one row per policy; runtime − simulator in percent).

    Args:
        runtime: the runtime's results, one per policy.
        sim: the simulator's results, same order.
        stats: the runtime's own numbers per policy (:meth:`RuntimeStats.as_dict` rows).
        prov: provenance of the run.
        options: the command's options (shown for reproduction).
        memory_mb: resident memory of the Ray processes at the end, MB.
    """
    cmd = "python experiments/run_cluster.py " + " ".join(
        f"--{k.replace('_', '-')} {' '.join(map(str, v)) if isinstance(v, list) else v}"
        for k, v in options.items()
        if v not in (None, False) and k not in ("out", "force", "no_progress", "data_dir", "report")
    ).replace(" True", "")
    scale = float(options.get("time_scale") or 1.0)  # type: ignore[arg-type]
    lines = [
        "# Runtime fidelity: the simulator against a Ray cluster",
        "",
        prov.markdown(),
        "",
        f"Command: `{cmd}`. Ray processes' resident memory at the end: {memory_mb:.0f} MB.",
        "",
        "| policy | jobs | finished (rt/sim) | avg JCT s (rt / sim, Δ) | avg queueing s (rt / sim) "
        "| makespan s (rt / sim, Δ) | same final Cell | reconfig. (rt/sim) | decision ms mean/p99 "
        "| same decisions (prefix) | checkpoints | redone GPU-h |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for rt, sm, st in zip(runtime, sim, stats, strict=True):
        a, b = rt.summary, sm.summary
        same, total, at_s = decision_agreement(rt, sm)
        agree = f"{same}/{total}" + ("" if at_s is None else f", then differ at {at_s:.0f} s")
        lines.append(
            f"| {rt.policy} | {a.jobs} | {a.finished}/{b.finished} "
            f"| {a.avg_jct_s:.0f} / {b.avg_jct_s:.0f}, {_pct(a.avg_jct_s, b.avg_jct_s)} "
            f"| {a.avg_queueing_s:.0f} / {b.avg_queueing_s:.0f} "
            f"| {a.makespan_s:.0f} / {b.makespan_s:.0f}, {_pct(a.makespan_s, b.makespan_s)} "
            f"| {100 * same_placements(rt, sm):.0f}% | {a.reconfigurations}/{b.reconfigurations} "
            f"| {st['decision_ms_mean']}/{st['decision_ms_p99']} | {agree} | {st['checkpoints']} "
            f"| {st['redone_gpu_h']} |"
        )
    lines += [
        "",
        "Where the two differ: (1) *reporting latency*: a finish reaches the driver a few "
        "milliseconds of wall time after it happens, i.e. seconds of scenario time at the time "
        "scale used, and every later event of that job's GPUs moves by as much; (2) *decision "
        "time*: the policy's wall time passes on the cluster's clock (the simulator decides in "
        f"zero time): at {scale:g}x a millisecond of decision is {scale / 1000:g} scenario "
        "seconds in which nothing starts, so a policy that decides slowly (a network behind a "
        "simulator copy, tens of ms) loses more than it would at real speed; (3) *near "
        "ties*: policies that compare remaining times (Crius) can choose differently when "
        "(1) and (2) shift a job's progress by a fraction of an iteration, "
        "after which the schedules diverge (`same decisions` is the common prefix of the two "
        "sequences of placements, in start order; `same final Cell` counts the jobs that "
        "ended on the same GPU type and count).",
        "",
    ]
    return "\n".join(lines)
