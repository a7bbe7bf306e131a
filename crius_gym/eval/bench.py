"""Measurement helpers for benchmarks: timed policies and isolated child-process runs."""

from __future__ import annotations

import itertools
import multiprocessing as mp
import resource
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from crius_gym.sim.actions import Action
from crius_gym.sim.policy import Policy, PolicyContext
from crius_gym.sim.snapshot import Snapshot

QUEUE_BINS = (0, 10, 100, 1_000, 10_000)  # lower edges of the waiting-job bins of the cost table


class TimedPolicy:
    """Wraps a policy and records the wall time of every ``decide`` call (seconds).

    It also records the number of waiting jobs at each decision, so the cost of a decision can
    be read against the queue length (:meth:`latency_by_queue_ms`).
    """

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name = inner.name
        self.tick_interval_s = inner.tick_interval_s
        self.latencies_s: list[float] = []
        self.queue_lengths: list[int] = []

    def reset(self, context: PolicyContext) -> None:
        """Reset the wrapped policy."""
        self.inner.reset(context)

    def decide(self, snapshot: Snapshot) -> Sequence[Action]:
        """Time the wrapped decision."""
        t0 = time.perf_counter()
        out = self.inner.decide(snapshot)
        self.latencies_s.append(time.perf_counter() - t0)
        self.queue_lengths.append(len(snapshot.waiting))
        return out

    def latency_by_queue_ms(self) -> dict[str, float]:
        """Mean decision latency (ms) per bin of waiting jobs (:data:`QUEUE_BINS`).

        Keys like ``decide_ms_q100`` (decisions with 100 to 999 jobs waiting); empty bins are
        left out. ``max_waiting`` is the longest queue seen.
        """
        lat = np.asarray(self.latencies_s) * 1000
        queue = np.asarray(self.queue_lengths)
        out: dict[str, float] = {"max_waiting": float(queue.max()) if queue.size else 0.0}
        edges = (*QUEUE_BINS, np.inf)
        for lo, hi in itertools.pairwise(edges):
            hit = (queue >= lo) & (queue < hi)
            if hit.any():
                out[f"decide_ms_q{int(lo)}"] = float(lat[hit].mean())
        return out

    def latency_stats_ms(self) -> dict[str, float]:
        """Mean, p99 and max decision latency in milliseconds."""
        a = np.asarray(self.latencies_s) * 1000 if self.latencies_s else np.zeros(1)
        return {
            "decide_mean_ms": float(a.mean()),
            "decide_p99_ms": float(np.percentile(a, 99)),
            "decide_max_ms": float(a.max()),
            "decisions": float(len(self.latencies_s)),
        }


def _child(fn: Callable[[], dict[str, Any]], queue: Any) -> None:
    try:
        out = fn()
        out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        queue.put(out)
    except BaseException as exc:  # report, never hang the parent
        queue.put({"error": f"{type(exc).__name__}: {exc}"})


def isolated(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run ``fn`` in a fresh forked process; its result plus the child's peak RSS (MB)."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(fn, queue))
    proc.start()
    out: dict[str, Any] = queue.get()
    proc.join()
    if "error" in out:
        raise RuntimeError(out["error"])
    return out


def median_of(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per key, the median over repeated runs (non-numbers from the first run)."""
    out: dict[str, Any] = {}
    for key in runs[0]:
        vals = [r[key] for r in runs]
        out[key] = float(np.median(vals)) if isinstance(vals[0], int | float) else vals[0]
    out["repeats"] = len(runs)
    return out
