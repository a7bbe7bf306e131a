"""Where a saved agent departs from its guide: its actions against the guide's, by kind.

Runs the policy (masked, deterministic, as evaluate.py does) on a scenario's own trace — or on
its synthetic test trace 0 when it has none, or on --trace FILE — and at every decision compares
the agent's action with the one the guide (Crius) proposes (`env.guide_action()`). Prints one
row per (guide's kind, agent's kind, same action?) with its count, then the run's summary, e.g.

    python experiments/agent_actions.py --policy results/policies/d-s1 --scenario crius-testbed

An agent that waits where the guide starts jobs shows as many `start → wait` rows.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
from collections.abc import Sequence

from crius_gym.cli import add_trace_options, run_main
from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.errors import ConfigError
from crius_gym.rl.agent import GreedyActor
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
    p.add_argument("--seed", type=int, default=0, help="seed of the episode's reset")
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
    actor = GreedyActor(model)
    counts: collections.Counter[tuple[str, str, bool]] = collections.Counter()
    obs, _ = env.reset(seed=args.seed, options={"trace": trace})
    while True:
        mask = env.action_masks()
        action, guide = actor(obs, mask), env.guide_action()
        assert guide is not None
        counts[(cfg.action_kind(guide), cfg.action_kind(action), action == guide)] += 1
        obs, _, term, trunc, _ = env.step(action)
        if term or trunc:
            break
    print(f"{path} on {sc.name}, trace {trace.name}: {sum(counts.values())} decisions")
    print("| guide | agent | same action | decisions |\n| --- | --- | --- | ---: |")
    for (g, a, same), n in counts.most_common():
        print(f"| {g} | {a} | {'yes' if same else 'no'} | {n:,} |")
    result = env.episode_result()
    assert result is not None
    s = result.summary
    print(
        f"avg JCT {s.avg_jct_s:,.0f} s, avg queueing {s.avg_queueing_s:,.0f} s, "
        f"throughput {s.avg_throughput:,.1f} samples/s, finished {s.finished}/{s.arrived}"
    )


if __name__ == "__main__":
    run_main(main)
