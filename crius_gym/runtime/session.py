"""A Ray cluster with its agents for one scenario, reused across runs (a context manager)."""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from crius_gym.perf.tuner import Tuner
from crius_gym.runtime.cluster import assign_nodes, ray_node_ids, start_agents, start_local_cluster
from crius_gym.runtime.driver import ClusterRuntime, RuntimeConfig, RuntimeResult
from crius_gym.runtime.ledger import Ledger
from crius_gym.scenarios import Scenario
from crius_gym.sim.policy import Policy
from crius_gym.workload.job import Trace


class RuntimeSession:
    """Starts (or joins) a Ray cluster for a scenario and runs traces on it.

    Args:
        scenario: the scenario (its cluster, tuner settings and ground truth).
        tuner: its tuner.
        ray_nodes: Ray nodes of a local cluster; on an existing cluster, agents are spread over
            its alive nodes instead.
        address: an existing cluster's ``HEAD:PORT`` (None: start a local one).
        data_dir: public data directory (a measured ground truth).
        checkpoint_dir: where jobs write their checkpoints.
    """

    def __init__(
        self,
        scenario: Scenario,
        tuner: Tuner,
        *,
        ray_nodes: int = 2,
        address: str | None = None,
        data_dir: str | Path | None = None,
        checkpoint_dir: str | Path = "results/tmp/runtime-checkpoints",
    ) -> None:
        self.scenario = scenario
        self.tuner = tuner
        self.address = address
        self.data_dir = data_dir
        self.checkpoint_dir = Path(checkpoint_dir)
        self.ray_nodes = ray_nodes
        self.local: Any | None = None
        self.local_nodes: list[Any] | None = None  # its worker nodes, in block order
        self.startup_s = 0.0

    def __enter__(self) -> RuntimeSession:
        import ray

        t0 = time.perf_counter()
        if self.address is None:
            self.blocks = assign_nodes(self.scenario.cluster, self.ray_nodes)
            self.local, self.local_nodes = start_local_cluster(self.blocks)
            ray.init(address=self.local.address, logging_level=logging.ERROR, log_to_driver=False)
        else:
            ray.init(address=self.address, logging_level=logging.ERROR, log_to_driver=False)
            ids = ray_node_ids(None)
            self.blocks = assign_nodes(self.scenario.cluster, min(len(ids), self.ray_nodes))
        self.slots = start_agents(self.blocks, ray_node_ids(self.local_nodes))
        self.startup_s = time.perf_counter() - t0
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        import ray

        ray.shutdown()
        if self.local is not None:
            self.local.shutdown()

    def describe(self) -> str:
        """One line: how scenario nodes map onto Ray nodes."""
        where = "local cluster" if self.local is not None else f"cluster at {self.address}"
        sizes = ", ".join(str(len(b)) for b in self.blocks)
        return f"{where}: {len(self.blocks)} agents hosting {sizes} scenario nodes"

    def run(
        self,
        trace: Trace,
        policy: Policy,
        *,
        seed: int = 0,
        time_scale: float = 1000.0,
        checkpoint_every_s: float = 600.0,
        on_step: Callable[[ClusterRuntime, float], None] | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> RuntimeResult:
        """Run one policy over a trace on the cluster (see :class:`ClusterRuntime`)."""
        sim = self.scenario.make_simulator(self.tuner, None, self.data_dir)
        ledger = Ledger(sim.cluster, sim.tuner, sim.truth, sim.config)
        runtime = ClusterRuntime(
            ledger,
            self.slots,
            self.checkpoint_dir,
            RuntimeConfig(time_scale=time_scale, checkpoint_every_s=checkpoint_every_s),
        )
        return runtime.run(trace, policy, seed=seed, on_step=on_step, on_progress=on_progress)

    def memory_mb(self) -> float:
        """Resident memory of this machine's Ray processes and this one, MB (0 if unknown)."""
        try:
            ps = subprocess.run(
                ["ps", "-eo", "rss,args"], capture_output=True, text=True, check=True
            ).stdout
        except (OSError, subprocess.CalledProcessError):
            return 0.0
        kb = 0
        for line in ps.splitlines()[1:]:
            rss, _, cmd = line.strip().partition(" ")
            if "ray" in cmd or "run_cluster" in cmd or "pytest" in cmd:
                kb += int(rss) if rss.isdigit() else 0
        return round(kb / 1024.0, 1)
