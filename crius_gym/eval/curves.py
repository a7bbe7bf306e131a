"""Learning curves exported from TensorBoard logs."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import EngFormatter, MaxNLocator
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from crius_gym.atomic import atomic_path

CURVE_TAGS = (
    "eval/avg_jct_s",
    "eval/crius_avg_jct_s",
    "eval/jct_vs_crius",
    "eval/avg_throughput",
    "rollout/ep_rew_mean",
    "sched/avg_jct_s",
    "sched/invalid_actions",
)


def read_scalars(log_dir: str | Path, tags: tuple[str, ...] = CURVE_TAGS) -> pd.DataFrame:
    """Scalars of every event file under ``log_dir`` as rows (tag, step, value)."""
    rows = []
    for events in sorted(Path(log_dir).rglob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
        acc.Reload()
        available = set(acc.Tags().get("scalars", []))
        for tag in tags:
            if tag in available:
                rows += [{"tag": tag, "step": e.step, "value": e.value} for e in acc.Scalars(tag)]
    df = pd.DataFrame(rows, columns=["tag", "step", "value"])
    return df.drop_duplicates(["tag", "step"], keep="last").sort_values(["tag", "step"])


def plot_learning_curves(curves: dict[str, pd.DataFrame], path: str | Path, caption: str) -> None:
    """Validation JCT (with Crius on the same traces) and training return vs timesteps."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for name, df in curves.items():
        jct = df[df["tag"] == "eval/avg_jct_s"]
        if not jct.empty:
            ax1.plot(jct["step"], jct["value"] / 3600, marker="o", ms=3, label=name)
        ref = df[df["tag"] == "eval/crius_avg_jct_s"]
        if not ref.empty:
            ax1.axhline(
                ref["value"].iloc[-1] / 3600,
                ls="--",
                lw=0.8,
                color="k",
                label=f"crius ({name} val traces)",
            )
        rew = df[df["tag"] == "rollout/ep_rew_mean"]
        if not rew.empty:
            ax2.plot(rew["step"], rew["value"], lw=0.8, label=name)
    ax1.set_xlabel("timesteps")
    ax1.set_ylabel("validation avg JCT (h)")
    ax1.set_title("Validation JCT vs Crius")
    ax2.set_xlabel("timesteps")
    ax2.set_ylabel("training episode return")
    ax2.set_title("Training return")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        # 200,704 written out overlaps its neighbours: at most 5 ticks, in k/M units.
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    fig.text(0.01, 0.005, caption, fontsize=6)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)
