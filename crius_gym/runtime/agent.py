"""The worker side: one long-lived agent per Ray node runs the jobs placed on its scenario nodes.

An agent hosts several scenario nodes (so a 32-node testbed fits on a laptop) and is pinned to
its Ray node; the driver talks to it by RPC. A job on a Cell is a gang: one member per scenario
node of its placement, each holding that node's GPUs in its agent; the member on the first node
(the leader) emulates training, the others hold their GPUs until the gang stops. Emulation
means iterating at the ground-truth speed of the job's plan under a time-compression factor,
after the pause the scheduler charged for tuning and restoring, writing a checkpoint of the
progress every ``checkpoint_every_s`` scenario seconds and on a graceful stop.

Why agents, and not an actor and a placement group per job: on this 2-core machine a new actor
took about 1 s and a placement group about 0.9 s to create and remove (``results/
runtime_fidelity.md``); under a time compression of 1,000 that is a quarter of an hour of
scenario time per start. Agents start once; a launch is one RPC (about 1 ms).

Checkpoints are JSON files ``<checkpoint_dir>/job<index>.json`` written atomically
(``{"progress_iters": float, "checkpoints": int}``); on a multi-machine cluster
``checkpoint_dir`` must be a shared file system. The module imports only the standard library,
so an agent process stays small.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class LaunchSpec:
    """What a gang member needs to run (or hold) its part of a job.

    Attributes:
        key: the launch's identity (``job<index>#<launch count>``).
        index: the job's trace index (names its checkpoint file).
        nodes: the scenario nodes this member holds, as ``(gpu type, node index)``.
        gpus_per_node: GPUs held on each.
        leader: whether this member emulates training (else it only holds GPUs).
        iterations: iterations the job asks for.
        progress_iters: iterations done before this launch.
        iter_time_s: seconds per iteration of its plan (scenario time).
        pause_s: tuning and restore pause before the first iteration (scenario seconds).
        time_scale: scenario seconds per wall second.
        checkpoint_every_s: scenario seconds between periodic checkpoints.
        checkpoint_dir: where checkpoints are written.
    """

    key: str
    index: int
    nodes: tuple[tuple[str, int], ...]
    gpus_per_node: int
    leader: bool
    iterations: int
    progress_iters: float
    iter_time_s: float
    pause_s: float
    time_scale: float
    checkpoint_every_s: float
    checkpoint_dir: str


def checkpoint_path(checkpoint_dir: str | Path, index: int) -> Path:
    """The checkpoint file of the job of trace ``index``."""
    return Path(checkpoint_dir) / f"job{index}.json"


def read_checkpoint(checkpoint_dir: str | Path, index: int) -> tuple[float, int]:
    """(iterations saved, checkpoints written so far) of a job; (0, 0) before its first."""
    path = checkpoint_path(checkpoint_dir, index)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return 0.0, 0
    return float(data["progress_iters"]), int(data["checkpoints"])


def _write_checkpoint(checkpoint_dir: str, index: int, progress_iters: float) -> int:
    _, count = read_checkpoint(checkpoint_dir, index)
    target = checkpoint_path(checkpoint_dir, index)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    with os.fdopen(fd, "w") as f:
        json.dump({"progress_iters": progress_iters, "checkpoints": count + 1}, f)
    os.replace(tmp, target)  # atomic: a reader sees the old checkpoint or the new one
    return count + 1


class _Run:
    """A leader's emulation of one launch."""

    def __init__(self, spec: LaunchSpec) -> None:
        self.spec = spec
        self.launched_wall = time.monotonic()
        self.iterating_from_wall = self.launched_wall + spec.pause_s / spec.time_scale
        self.task: asyncio.Task[dict[str, object]] | None = None

    def progress_iters(self, wall: float) -> float:
        s = self.spec
        done = max(0.0, wall - self.iterating_from_wall) * s.time_scale / s.iter_time_s
        return min(float(s.iterations), s.progress_iters + done)

    async def emulate(self) -> dict[str, object]:
        s = self.spec
        end_wall = self.iterating_from_wall + (
            (s.iterations - s.progress_iters) * s.iter_time_s / s.time_scale
        )
        every_wall = s.checkpoint_every_s / s.time_scale
        next_checkpoint = self.iterating_from_wall + every_wall
        while (now := time.monotonic()) < end_wall:
            await asyncio.sleep(min(end_wall, next_checkpoint) - now)
            if time.monotonic() >= next_checkpoint and next_checkpoint < end_wall:
                # A checkpoint is taken between iterations: whole iterations only.
                done = math.floor(self.progress_iters(next_checkpoint))
                _write_checkpoint(s.checkpoint_dir, s.index, float(done))
                next_checkpoint += every_wall
        return {"status": "finished", "key": s.key}


class NodeAgent:
    """Runs the gang members placed on its scenario nodes (a Ray actor; see the module doc).

    Args:
        nodes: the scenario nodes it hosts, ``(gpu type, node index, GPUs)``.
    """

    def __init__(self, nodes: list[tuple[str, int, int]]) -> None:
        self._capacity = {(t, k): g for t, k, g in nodes}
        self._used = dict.fromkeys(self._capacity, 0)
        self._members: dict[str, LaunchSpec] = {}
        self._runs: dict[str, _Run] = {}
        self._stopped: set[str] = set()  # keys are never reused: a stop may overtake its launch
        self._forever = asyncio.Event()

    async def ping(self) -> int:
        """The agent's process id (a liveness check)."""
        return os.getpid()

    async def sentinel(self) -> None:
        """Never returns while the agent lives: the driver learns of its death from this call."""
        await self._forever.wait()

    def _take(self, spec: LaunchSpec) -> None:
        for node in spec.nodes:
            if node not in self._capacity:
                raise RuntimeError(f"{spec.key}: node {node} is not hosted by this agent")
            if self._used[node] + spec.gpus_per_node > self._capacity[node]:
                raise RuntimeError(
                    f"{spec.key}: node {node} has not {spec.gpus_per_node} GPUs free"
                )
        for node in spec.nodes:
            self._used[node] += spec.gpus_per_node
        self._members[spec.key] = spec

    async def hold(self, spec: LaunchSpec) -> None:
        """A gang member that is not the leader: hold its GPUs until :meth:`stop`.

        Raises:
            RuntimeError: the GPUs are not free here (the driver and the agent disagree).
        """
        if spec.key not in self._stopped:
            self._take(spec)

    async def run(self, spec: LaunchSpec) -> dict[str, object]:
        """The gang's leader: hold its GPUs and emulate training until done or stopped.

        Returns:
            ``{"status": "finished" | "stopped", "key": spec.key}`` when the run ends.

        Raises:
            RuntimeError: the GPUs are not free here (the driver and the agent disagree).
        """
        if spec.key in self._stopped:  # stopped before this call began (calls may reorder)
            return {"status": "stopped", "key": spec.key}
        self._take(spec)
        run = _Run(spec)
        run.task = asyncio.get_running_loop().create_task(run.emulate())
        self._runs[spec.key] = run
        try:
            result = await asyncio.shield(run.task)
        except asyncio.CancelledError:
            return {"status": "stopped", "key": spec.key}
        self._release(spec.key)
        return result

    async def stop(self, key: str, save: bool = True) -> float | None:
        """End a gang member now; a leader with ``save`` writes a checkpoint of its exact progress.

        Returns:
            The leader's progress in iterations (None for a member that only held GPUs, or a
            launch that is already over or not begun).
        """
        self._stopped.add(key)
        run = self._runs.get(key)
        progress = None
        if run is not None and run.task is not None and not run.task.done():
            run.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await run.task
            progress = run.progress_iters(time.monotonic())
            if save:
                _write_checkpoint(run.spec.checkpoint_dir, run.spec.index, progress)
        self._release(key)
        return progress

    def _release(self, key: str) -> None:
        spec = self._members.pop(key, None)
        self._runs.pop(key, None)
        if spec is not None:
            for node in spec.nodes:
                self._used[node] -= spec.gpus_per_node

    async def used_gpus(self) -> dict[str, int]:
        """GPUs held per hosted node (``"<type>:<index>"``), for checks."""
        return {f"{t}:{k}": n for (t, k), n in self._used.items()}
