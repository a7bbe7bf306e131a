"""The schedule of a run as a Gantt chart: jobs over time on each GPU type's GPUs.

One panel per GPU type, one row per GPU (grouped by node; up to 40 nodes, separated by thin
lines), one coloured bar per job per GPU it held (colour by job). Markers show what changed:
``>`` a start or a resume after preemption, a blue diamond a reconfiguration (the job moved or
resized), a red ``x`` a preemption. The bars come from
:attr:`crius_gym.sim.simulator.RunResult.segments`; GPUs are drawn in rows by a first-fit per
node, so a job keeps its rows while it holds a node.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.lines import Line2D

from crius_gym.atomic import atomic_path
from crius_gym.hardware.cluster import ClusterSpec
from crius_gym.sim.schedule import Segment
from crius_gym.sim.simulator import RunResult

# Marker of each way a segment begins or ends: (marker, colour, label).
_MARKS = {
    "start": (">", "black", "start / resume"),
    "reconfigure": ("D", "tab:blue", "reconfiguration"),
    "preempt": ("x", "tab:red", "preemption"),
}


def gantt_file_name(policy: str) -> str:
    """``gantt_<policy>.png`` with characters unsafe in file names replaced (``ppo:r@1`` …)."""
    return f"gantt_{file_safe(policy)}.png"


def file_safe(name: str) -> str:
    """``name`` with characters unsafe in file names replaced by ``_``.

    For labels such as ``ppo:r@1`` and plug-ins' ``path/file.py:Class``.
    """
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def gpu_rows(segments: Sequence[Segment], gpus_per_node: int) -> list[list[int]]:
    """Rows (node × ``gpus_per_node`` + slot) of each segment's GPUs, first fit per node.

    Segments are taken in time order, releases before holds at the same instant, so the slots
    of one node are never double-booked when the schedule itself is valid.

    Raises:
        ValueError: a node is asked for more GPUs than it has free (an invalid schedule).
    """
    events = sorted(range(len(segments)), key=lambda i: segments[i].start_s)
    busy_until: dict[int, list[float]] = {}
    rows: list[list[int]] = [[] for _ in segments]
    for i in events:
        s = segments[i]
        for node in s.nodes:
            slots = busy_until.setdefault(node, [-np.inf] * gpus_per_node)
            free = [k for k, t in enumerate(slots) if t <= s.start_s][: s.gpus_per_node]
            if len(free) < s.gpus_per_node:
                raise ValueError(
                    f"{s.job_id}: node {node} has {len(free)} free GPUs at {s.start_s} s, "
                    f"needs {s.gpus_per_node}"
                )
            for k in free:
                slots[k] = s.end_s
                rows[i].append(node * gpus_per_node + k)
    return rows


def plot_gantt(
    result: RunResult, cluster: ClusterSpec, path: str | Path, caption: str, title: str
) -> None:
    """Write the Gantt chart of one run (module docstring) to ``path`` (atomically)."""
    groups = [g for g in cluster.groups if g.num_nodes * g.gpus_per_node > 0]
    heights = [max(g.num_nodes * g.gpus_per_node, 4) for g in groups]
    fig, axes = plt.subplots(
        len(groups),
        1,
        figsize=(10.0, min(2.0 + 0.05 * sum(heights) + 0.8 * len(groups), 14.0)),
        sharex=True,
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    cmap = plt.get_cmap("tab20")
    end_h = max((s.end_s for s in result.segments), default=0.0) / 3600
    for ax, group in zip(axes[:, 0], groups, strict=True):
        segs = [s for s in result.segments if s.gpu_type == group.gpu_type]
        rows = gpu_rows(segs, group.gpus_per_node)
        verts, colours = [], []
        marks: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in _MARKS}
        for s, rs in zip(segs, rows, strict=True):
            x0, x1 = s.start_s / 3600, s.end_s / 3600
            for r in rs:
                verts.append([(x0, r), (x1, r), (x1, r + 0.9), (x0, r + 0.9)])
                colours.append(cmap(s.job_index % 20))
            mid = float(np.mean(rs)) + 0.45
            began = "start" if s.began in ("start", "resume") else "reconfigure"
            marks[began][0].append(x0)
            marks[began][1].append(mid)
            if s.ended == "preempt":
                marks["preempt"][0].append(x1)
                marks["preempt"][1].append(mid)
        ax.add_collection(PolyCollection(verts, facecolors=colours, edgecolors="none"))
        for kind, (xs, ys) in marks.items():
            marker, colour, _ = _MARKS[kind]
            size = 16 if kind == "preempt" else 9
            ax.scatter(xs, ys, marker=marker, s=size, c=colour, linewidths=0.9, zorder=3)
        total = group.num_nodes * group.gpus_per_node
        if group.num_nodes <= 40:  # beyond that the separators would grey the whole panel
            for n in range(1, group.num_nodes):
                ax.axhline(n * group.gpus_per_node, color="0.8", lw=0.3)
        ax.set_xlim(0, max(end_h, 1e-6))
        ax.set_ylim(0, total)
        ax.invert_yaxis()
        ax.set_ylabel(f"{group.gpu_type}\n{group.num_nodes}×{group.gpus_per_node} GPUs", fontsize=7)
        ax.tick_params(axis="y", labelsize=6)
    axes[-1, 0].set_xlabel("simulated time (h)")
    axes[0, 0].set_title(title, fontsize=9, loc="left")
    handles = [
        Line2D([], [], marker=m, color=c, linestyle="none", label=label)
        for m, c, label in _MARKS.values()
    ]
    axes[0, 0].legend(
        handles=handles, fontsize=6, ncol=3, loc="lower right", bbox_to_anchor=(1.0, 1.0)
    )
    fig.text(0.01, 0.005, caption, fontsize=6, wrap=True)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)
