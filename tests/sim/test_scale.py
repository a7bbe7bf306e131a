"""Large-cluster smoke test: a few hundred jobs on a 6,400-GPU four-type cluster (catches
accidental quadratic behaviour in the simulator, tuner and policies; timing is not asserted —
benchmarks measure speed)."""

import dataclasses

import pytest

from crius_gym.hardware.cluster import ClusterSpec
from crius_gym.policies.registry import make_policy
from crius_gym.scenarios import load_scenario


@pytest.mark.parametrize("policy", ["fcfs", "crius"])
def test_few_hundred_jobs_on_6400_gpus(policy):
    base = load_scenario("crius-sim-1280")
    groups = tuple(dataclasses.replace(g, num_nodes=g.num_nodes * 5) for g in base.cluster.groups)
    sc = dataclasses.replace(base, cluster=ClusterSpec(groups), _memo={})
    assert sc.cluster.num_gpus == 6400
    trace = sc.synthetic_trace("test", 0, num_jobs=300)
    res = sc.make_simulator().run(trace, make_policy(policy), seed=0)
    assert res.summary.finished + res.summary.rejected == 300
