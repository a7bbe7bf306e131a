"""Figures: CDFs of JCT and queueing delay, throughput over time. Each states its command."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from crius_gym.atomic import atomic_path
from crius_gym.sim.simulator import RunResult

#: The reference every figure is read against: drawn thick, black and on top.
REFERENCE_POLICY = "crius"


def _style(index: int, policy: str) -> dict[str, object]:
    """Distinct colours for up to 20 lines; learned agents solid, heuristics dashed; Crius bold."""
    if policy == REFERENCE_POLICY:
        return {"color": "black", "linestyle": "-", "linewidth": 2.2, "zorder": 5}
    return {
        "color": plt.get_cmap("tab20")(index % 20),
        "linestyle": "-" if policy.startswith("ppo:") else "--",
    }


def _legend(ax: Axes) -> None:
    """Legend beside the axes: with a dozen policies it would hide the curves."""
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def _save(fig: Figure, path: str | Path, caption: str) -> None:
    fig.text(0.01, 0.005, caption, fontsize=6, wrap=True)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)


def plot_cdf(
    results: Sequence[RunResult], field: str, path: str | Path, caption: str, title: str
) -> None:
    """CDF over finished jobs (pooled over traces) of a per-job field, one line per policy."""
    fig, ax = plt.subplots(figsize=(9.0, 4.6))
    policies = list(dict.fromkeys(r.policy for r in results))
    for index, policy in enumerate(policies):
        vals = np.sort(
            np.array(
                [
                    getattr(j, field)
                    for r in results
                    if r.policy == policy
                    for j in r.jobs
                    if j.status == "finished"
                ],
                dtype=float,
            )
        )
        if len(vals) == 0:
            continue
        ax.step(
            np.maximum(vals, 1.0),
            np.arange(1, len(vals) + 1) / len(vals),
            where="post",
            label=f"{policy} (n={len(vals)})",
            **_style(index, policy),  # type: ignore[arg-type]
        )
    ax.set_xscale("log")
    ax.set_xlabel(f"{field.replace('_s', '')} (s, log scale; 0 shown at 1 s)")
    ax.set_ylabel("fraction of finished jobs")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    _legend(ax)
    _save(fig, path, caption)


def plot_throughput(
    results: Sequence[RunResult], path: str | Path, caption: str, title: str
) -> None:
    """Cluster throughput (samples/s) over time for the first trace of each policy."""
    fig, ax = plt.subplots(figsize=(9.0, 4.6))
    seen: list[str] = []
    for r in results:
        if r.policy in seen or len(r.series.time_s) == 0:
            continue
        seen.append(r.policy)
        ax.step(
            r.series.time_s / 3600,
            r.series.throughput,
            where="post",
            label=f"{r.policy} ({r.trace})",
            **{"linewidth": 0.8, **_style(len(seen) - 1, r.policy)},  # type: ignore[arg-type]
        )
    ax.set_xlabel("simulated time (h)")
    ax.set_ylabel("throughput (samples/s)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    _legend(ax)
    _save(fig, path, caption)
