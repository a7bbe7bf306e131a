"""A user-written scheduler, "shortest remaining work first", compared with the built-ins.

Nothing here is registered in ``crius_gym``: the policy is a plain class that satisfies the
:class:`crius_gym.sim.policy.Policy` protocol, and :func:`compare` hands it to
:func:`crius_gym.eval.runs.run_policies` through ``policy_factory``. See ``docs/extending.md``.

Run ``python docs/examples/srwf_policy.py --help``; the defaults (scenario ``tiny``, 2 test
traces) finish in seconds.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from crius_gym.eval.runs import run_policies
from crius_gym.eval.tables import aggregate, markdown_table, summary_frame
from crius_gym.policies.registry import make_policy
from crius_gym.scenarios import Scenario, load_scenario
from crius_gym.sim.actions import Action, Start
from crius_gym.sim.policy import Policy, PolicyContext
from crius_gym.sim.records import JobView
from crius_gym.sim.simulator import RunResult
from crius_gym.sim.snapshot import Snapshot

# ---------------------------------------------------------------------------- the policy


class ShortestRemainingWorkFirst:
    """Start waiting jobs in order of least remaining work, each on its best Cell that fits.

    A job's remaining work is its remaining iterations times the estimated seconds per
    iteration on its fastest Cell (the tuner's first candidate), optionally times that Cell's
    GPU count (GPU-seconds). Jobs are never preempted: a start is final until the job ends.
    A job that fits nowhere now is skipped (no head-of-line blocking: later jobs backfill).

    Args:
        gpu_seconds: rank by remaining GPU-seconds instead of remaining seconds.
        name: the label of this policy in result tables.
    """

    tick_interval_s: float | None = None  # decide only at arrivals and completions

    def __init__(self, gpu_seconds: bool = False, name: str = "srwf") -> None:
        self.gpu_seconds = gpu_seconds
        self.name = name

    def reset(self, context: PolicyContext) -> None:
        """Nothing is kept between decisions, so there is nothing to clear."""

    def remaining_work(self, snapshot: Snapshot, view: JobView) -> float:
        """Estimated seconds (or GPU-seconds) left for a job on its fastest Cell."""
        # Ranked, best throughput first; never empty for a waiting job (the simulator rejects
        # a job that fits nowhere when it arrives).
        best = snapshot.candidates(view.job).candidates[0]
        left = view.job.iterations - view.progress_at(snapshot.now_s)
        return left * best.iter_time_s * (best.num_gpus if self.gpu_seconds else 1)

    def decide(self, snapshot: Snapshot) -> Sequence[Action]:
        """Start as many waiting jobs as fit, least remaining work first."""
        alloc = snapshot.scratch()  # a private copy: plan several starts without double booking
        actions: list[Action] = []
        # sorted() is stable: ties keep arrival order.
        for view in sorted(snapshot.waiting, key=lambda v: self.remaining_work(snapshot, v)):
            for estimate in snapshot.candidates(view.job).candidates:
                if alloc.can_place(estimate.cell):
                    alloc.place(estimate.cell)
                    actions.append(Start(view.job.job_id, estimate.cell, tuning="pruned"))
                    break
        return actions


# ---------------------------------------------------------------------------- the comparison


def compare(
    scenario: Scenario | str = "tiny",
    num_traces: int = 2,
    baselines: Sequence[str] = ("crius", "fcfs"),
    progress: bool = False,
) -> list[RunResult]:
    """Run the example policy and some built-in ones on a scenario's first test traces.

    Args:
        scenario: a scenario or its name (``envs/<name>.yaml``).
        num_traces: how many synthetic test traces (at most the scenario's ``test_traces``).
        baselines: registered policy names to compare with.
        progress: show a progress bar per run.

    Returns:
        One result per (policy, trace), policy-major, the example policy first.

    Raises:
        ValueError: ``num_traces`` is not in [1, the scenario's test_traces].
    """
    sc = load_scenario(scenario) if isinstance(scenario, str) else scenario
    if not 1 <= num_traces <= sc.splits.test_traces:
        raise ValueError(f"num_traces must be in [1, {sc.splits.test_traces}] for {sc.name}")
    tuner = sc.make_tuner()  # shared: every policy and trace reuses its cache
    traces = [sc.synthetic_trace("test", i, tuner=tuner) for i in range(num_traces)]
    mine = ShortestRemainingWorkFirst()

    def factory(name: str) -> Policy:
        # Called once per (policy, trace); reset() is called by the simulator before each run.
        return ShortestRemainingWorkFirst() if name == mine.name else make_policy(name, scenario=sc)

    names = [mine.name, *baselines]
    return run_policies(sc, traces, names, tuner=tuner, progress=progress, policy_factory=factory)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the arguments, run the comparison and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="tiny", help="scenario name (default: tiny)")
    parser.add_argument("--traces", type=int, default=2, help="test traces (default: 2)")
    parser.add_argument("--progress", action="store_true", help="show progress bars")
    args = parser.parse_args(argv)
    results = compare(args.scenario, args.traces, progress=args.progress)
    columns = ("avg_jct_s", "p95_jct_s", "avg_queueing_s", "makespan_s", "finished", "rejected")
    agg = aggregate(summary_frame(results), columns)  # paired change vs "crius" when it ran
    print(markdown_table(agg, columns))


if __name__ == "__main__":
    main()
