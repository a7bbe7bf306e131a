"""FCFS variants: global FIFO, the artifact's per-type FIFO, best layout only; scenario presets."""

from __future__ import annotations

import pytest

from crius_gym.errors import InputFileError
from crius_gym.policies.baselines import FCFS
from crius_gym.policies.crius import CriusPolicy
from crius_gym.policies.registry import describe, make_policy
from crius_gym.scenarios import load_scenario, parse_scenario
from tests.sim.conftest import job, make_sim, trace

A100, V100 = "a100-40gb", "v100-32gb"


def blocked_a100_trace():
    # j0 holds all 4 A100s; j1 (A100) must wait; j2 (V100) arrives behind it.
    return trace(
        job(0, 0.0, iters=1000, gpus=4, gpu_type=A100),
        job(1, 1.0, iters=10, gpus=4, gpu_type=A100),
        job(2, 2.0, iters=10, gpus=1, gpu_type=V100),
    )


@pytest.mark.parametrize(("per_type", "v100_waits"), [(False, True), (True, False)])
def test_a_blocked_a100_job_blocks_a_v100_job_only_under_one_global_queue(per_type, v100_waits):
    sim = make_sim(
        [
            {"gpu": "a100", "nodes": 1, "gpus_per_node": 4},
            {"gpu": "v100", "nodes": 1, "gpus_per_node": 4},
        ]
    )
    res = sim.run(blocked_a100_trace(), FCFS(per_type_fifo=per_type))
    j0, j1, j2 = res.jobs
    assert j1.first_start_s == pytest.approx(j0.finish_s)  # same type: FIFO either way
    if v100_waits:
        assert j2.first_start_s == pytest.approx(j0.finish_s)
    else:
        assert j2.first_start_s == pytest.approx(2.0)


def test_best_layout_only_waits_for_the_fewest_nodes():
    # Two nodes of 2 A40s. A and B fill node 0, C and D node 1; B and D finish at once, leaving
    # one free GPU on each node when E (2 GPUs) arrives: it fits only as 2 nodes x 1 GPU.
    sim = make_sim([{"gpu": "a40", "nodes": 2, "gpus_per_node": 2}])
    one = {"gpus": 1, "gpu_type": "a40"}
    jobs = trace(
        job(0, 0.0, iters=10_000, **one),
        job(1, 0.0, iters=1, **one),
        job(2, 0.0, iters=10_000, **one),
        job(3, 0.0, iters=1, **one),
        job(4, 1000.0, iters=10, gpus=2, gpu_type="a40"),
    )
    relaxed = sim.run(jobs, FCFS()).jobs
    best = sim.run(jobs, FCFS(best_layout_only=True)).jobs
    assert relaxed[4].first_start_s == pytest.approx(1000.0)
    assert best[4].first_start_s == pytest.approx(min(best[0].finish_s, best[2].finish_s))
    assert best[4].first_start_s > 1000.0


def test_artifact_presets_and_scenario_definitions():
    fcfs = make_policy("fcfs-artifact")
    assert isinstance(fcfs, FCFS)
    assert (fcfs.auto_parallel, fcfs.per_type_fifo, fcfs.best_layout_only) == (True, True, True)
    crius = make_policy("crius-artifact")
    assert isinstance(crius, CriusPolicy)
    assert crius.options.upgrade_on_arrivals and not crius.options.charge_pause
    sc = load_scenario("crius-sim-1280-artifact")
    as_named = make_policy("fcfs", scenario=sc)
    assert as_named.name == "fcfs" and isinstance(as_named, FCFS) and as_named.per_type_fifo
    assert make_policy("crius", scenario=sc).options == crius.options
    assert not make_policy("fcfs").per_type_fifo  # the registry's fcfs is unchanged
    assert describe("fcfs", sc) == "fcfs = fcfs-artifact" and describe("fcfs") == "fcfs"


def test_scenario_policy_definitions_with_options_and_errors():
    raw = {
        "cluster": [{"gpu": "a40", "nodes": 2, "gpus_per_node": 2}],
        "policies": {
            "fcfs": {"policy": "fcfs", "per_type_fifo": True},
            "mine": "crius",
            "broken": "no-such-policy",
            "badopt": {"policy": "fcfs", "per_type_fifa": True},
        },
    }
    sc = parse_scenario(raw, "s.yaml", "s")
    assert make_policy("fcfs", scenario=sc).per_type_fifo
    assert make_policy("mine", scenario=sc).name == "mine"
    with pytest.raises(InputFileError, match=r"policies\.broken.*unknown policy"):
        make_policy("broken", scenario=sc)
    with pytest.raises(InputFileError, match=r"policies\.badopt"):
        make_policy("badopt", scenario=sc)
    with pytest.raises(InputFileError, match=r"policies\.x"):
        parse_scenario({**raw, "policies": {"x": 3}}, "s.yaml", "s")
