"""Where a saved agent departs from its guide: its actions against the guide's, by kind.

Runs the policy (masked, deterministic) on a scenario's own trace — or on its synthetic test
trace 0 when it has none, or on --trace FILE — and at every decision compares the agent's action
with the one the guide (Crius) proposes (`env.guide_action()`). By default the agent is deployed
as evaluate.py deploys it (the guide margin and envelope its metadata.yaml records); with
`--deployment none` it is the bare network's argmax. Prints one row per (guide's kind, agent's
kind, same action?) with its count, how many decisions fell outside the envelope (where Crius
decides), then the run's summary, e.g.

    python experiments/agent_actions.py --policy results/policies/d-s1 --scenario crius-testbed

An agent that waits where the guide starts jobs shows as many `start → wait` rows.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
from collections.abc import Sequence

from crius_gym.cli import SEED, add_trace_options, run_main
from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.errors import ConfigError
from crius_gym.rl.agent import GreedyActor
from crius_gym.rl.deviation import recorded_deployment
from crius_gym.rl.saved import load_policy, policy_file, read_metadata
from crius_gym.scenarios import load_scenario
from crius_gym.scenarios.trace_files import read_trace
from crius_gym.workload.mapping import JobMapping


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--policy", required=True, help="a model .zip or a results/policies/<run> folder"
    )
    p.add_argument("--scenario", required=True, help="scenario (name or YAML file) to run on")
    add_trace_options(p, "a trace file to run instead of the scenario's own")
    p.add_argument("--seed", type=SEED, default=0, help="seed of the episode's reset")
    p.add_argument(
        "--deployment",
        choices=("recorded", "none"),
        default="recorded",
        help="recorded: the guide margin and envelope of the policy's metadata.yaml, as "
        "evaluate.py runs it; none: the network's plain argmax (default: recorded)",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    path = policy_file(args.policy)
    meta = read_metadata(path)
    sc = load_scenario(args.scenario)
    cfg = dataclasses.replace(EnvConfig(**meta["env_config"]), max_decisions=10**12)
    if cfg.guide is None:
        raise ConfigError(f"{path} was trained without a guide: nothing to compare with")
    env = CriusEnv(sc, cfg)
    model, _ = load_policy(path, env)
    trace = (
        read_trace(
            args.trace,
            args.trace_format,
            tuner=env.tuner,
            mapping=JobMapping(seed=args.trace_seed),
        )
        if args.trace
        else sc.own_trace(tuner=env.tuner)
    )
    margin, envelope = (
        recorded_deployment(path, meta) if args.deployment == "recorded" else (0.0, None)
    )
    actor = GreedyActor(model, margin, envelope)
    counts: collections.Counter[tuple[str, str, bool]] = collections.Counter()
    outside = 0
    obs, info = env.reset(seed=args.seed, options={"trace": trace})
    while True:
        mask = env.action_masks()
        guide = env.guide_action()
        assert guide is not None
        waiting, running = int(info["waiting"]), int(info["running"])
        outside += envelope is not None and not envelope.holds(waiting, running)
        action = actor(obs, mask, guide, waiting, running)
        counts[(cfg.action_kind(guide), cfg.action_kind(action), action == guide)] += 1
        obs, _, term, trunc, info = env.step(action)
        if term or trunc:
            break
    total = sum(counts.values())
    how = (
        "bare network"
        if args.deployment == "none"
        else f"guide margin {margin:g}, envelope "
        + ("none" if envelope is None else envelope.describe())
    )
    print(f"{path} on {sc.name}, trace {trace.name} ({how}): {total} decisions")
    print("| guide | agent | same action | decisions |\n| --- | --- | --- | ---: |")
    for (g, a, same), n in counts.most_common():
        print(f"| {g} | {a} | {'yes' if same else 'no'} | {n:,} |")
    if envelope is not None:
        print(f"outside the envelope (Crius decides): {outside:,} of {total:,} decisions")
    result = env.episode_result()
    assert result is not None
    s = result.summary
    print(
        f"avg JCT {s.avg_jct_s:,.0f} s, avg queueing {s.avg_queueing_s:,.0f} s, "
        f"throughput {s.avg_throughput:,.1f} samples/s, finished {s.finished}/{s.arrived}"
    )


if __name__ == "__main__":
    run_main(main)
