"""The runtime on a local Ray cluster: the simulator's jobs finish, faults lose only redone work."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

ray = pytest.importorskip("ray")

from crius_gym.plugins import make_policy  # noqa: E402
from crius_gym.runtime.driver import ClusterRuntime  # noqa: E402
from crius_gym.runtime.session import RuntimeSession  # noqa: E402
from crius_gym.scenarios import load_scenario  # noqa: E402

pytestmark = pytest.mark.ray
SCALE = 10_000.0  # a scenario hour in 0.36 s


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RuntimeSession]:
    sc = load_scenario("tiny")
    tuner = sc.make_tuner(None, None)
    ck = tmp_path_factory.mktemp("ck")
    with RuntimeSession(sc, tuner, ray_nodes=3, checkpoint_dir=ck) as s:
        yield s


def _trace(s: RuntimeSession, n: int = 8):  # type: ignore[no-untyped-def]
    trace = s.scenario.own_trace(None, s.tuner)
    return dataclasses.replace(trace, jobs=trace.jobs[:n])


@pytest.mark.parametrize("policy", ["fcfs", "crius"])
def test_runtime_finishes_the_simulators_jobs(session: RuntimeSession, policy: str) -> None:
    trace = _trace(session)
    run = session.run(trace, make_policy(policy, scenario=session.scenario), time_scale=SCALE)
    sim = session.scenario.make_simulator(session.tuner, None, None)
    ref = sim.run(trace, make_policy(policy, scenario=session.scenario))
    done = {j.job_id for j in run.result.jobs if j.status == "finished"}
    assert (
        done
        == {j.job_id for j in ref.jobs if j.status == "finished"}
        == {j.job_id for j in trace.jobs}
    )
    assert run.stats.failures == 0 and run.stats.checkpoints > 0
    if policy == "fcfs":  # no near ties to flip: the same schedule, a few ms of latency apart
        assert run.result.summary.avg_jct_s == pytest.approx(ref.summary.avg_jct_s, rel=0.03)


def test_a_removed_node_loses_only_work_since_the_checkpoints(session: RuntimeSession) -> None:
    trace = _trace(session)
    local = session.local
    assert session.local_nodes is not None
    victim = session.local_nodes[-1]
    removed: list[float] = []

    def remove_when_busy(rt: ClusterRuntime, now_s: float) -> None:
        gangs = rt._gangs
        if not removed and any(len(rt.slots) - 1 in g.agents for g in gangs.values()):
            local.remove_node(victim)
            removed.append(now_s)

    run = session.run(
        trace,
        make_policy("crius", scenario=session.scenario),
        time_scale=SCALE,
        checkpoint_every_s=300.0,
        on_step=remove_when_busy,
    )
    assert removed, "the victim node never ran a job"
    jobs = run.result.jobs
    assert all(j.status == "finished" for j in jobs)
    assert all(j.progress_iters == j.iterations for j in jobs)  # nothing lost, none counted twice
    assert run.stats.failures >= 1 and run.stats.nodes_lost >= 1
    assert run.stats.redone_iters >= 0.0
    assert any(s.ended == "failed" for s in run.result.segments)
    lost = [s for s in session.slots if not s.alive]
    assert len(lost) == 1
    assert not any(  # nothing ran on the lost nodes after the failure
        s.gpu_type == t and k in s.nodes and s.start_s > removed[0]
        for s in run.result.segments
        for t, k, _ in lost[0].block
    )


def test_a_crashed_agent_restarts_and_its_jobs_resume(session: RuntimeSession) -> None:
    trace = _trace(session, 6)
    killed: list[int] = []

    def kill_when_busy(rt: ClusterRuntime, now_s: float) -> None:
        if killed:
            return
        for g in rt._gangs.values():
            if rt.slots[g.agents[0]].alive:
                ray.kill(rt.slots[g.agents[0]].handle, no_restart=False)
                killed.append(g.agents[0])
                return

    before = sum(s.alive for s in session.slots)
    run = session.run(
        trace,
        make_policy("crius", scenario=session.scenario),  # fits the nodes a removal left
        time_scale=SCALE,
        on_step=kill_when_busy,
    )
    assert killed
    assert run.stats.agent_restarts == 1 and run.stats.failures >= 1
    assert run.stats.nodes_lost == 0 and sum(s.alive for s in session.slots) == before
    assert all(j.status == "finished" for j in run.result.jobs)
    assert all(j.progress_iters == j.iterations for j in run.result.jobs)
