"""The runtime's books: wall-clock time, reported completions, failures, lookahead forks."""

from __future__ import annotations

from crius_gym.plugins import make_policy
from crius_gym.runtime.ledger import Ledger
from crius_gym.scenarios import load_scenario
from crius_gym.sim.records import JobStatus


def _ledger() -> tuple[Ledger, object]:
    sc = load_scenario("tiny")
    tuner = sc.make_tuner(None, None)
    sim = sc.make_simulator(tuner, None, None)
    trace = sc.own_trace(None, tuner)
    return Ledger(sim.cluster, sim.tuner, sim.truth, sim.config), (sc, sim, trace)


def test_ledger_never_predicts_a_finish_and_books_reports_at_their_time() -> None:
    led, (sc, _, trace) = _ledger()
    led.reset(trace)
    assert led.advance_to(trace.jobs[0].arrival_s)  # the first arrival makes a decision due
    led.apply(make_policy("fcfs", scenario=sc).decide(led.snapshot()))
    rec = led.records[0]
    far = trace.jobs[0].arrival_s + 100 * rec.job.iterations * rec.iter_time_s
    led.advance_to(min(far, trace.jobs[1].arrival_s - 1))
    assert rec.status is JobStatus.RUNNING  # long past its analytic finish: still running
    led.complete(0)
    assert rec.status is JobStatus.FINISHED and rec.finish_s == led.now_s


def test_failure_returns_the_job_to_the_queue_from_its_checkpoint() -> None:
    led, (sc, _, trace) = _ledger()
    led.reset(trace)
    led.advance_to(trace.jobs[0].arrival_s)
    led.apply(make_policy("fcfs", scenario=sc).decide(led.snapshot()))
    led.advance_to(trace.jobs[0].arrival_s + 600)
    before = led.records[0].progress_at(led.now_s)
    lost = led.fail(0, checkpoint_iters=10.0)
    rec = led.records[0]
    assert rec.status is JobStatus.WAITING and rec.progress_iters == 10.0
    assert lost == before - 10.0 and led.allocator.busy_gpus() == 0


def test_a_fork_of_the_ledger_finishes_its_running_jobs() -> None:
    led, (sc, sim, trace) = _ledger()
    led.reset(trace)
    led.advance_to(trace.jobs[0].arrival_s)
    led.apply(make_policy("fcfs", scenario=sc).decide(led.snapshot()))
    led.advance_to(trace.jobs[0].arrival_s + 1000)
    fork = led.fork_present()
    while fork.advance():
        pass
    assert fork.records[0].status is JobStatus.FINISHED
    # …when the simulator itself would finish it (same speed, same start)
    sim.reset(trace)
    sim.advance()
    sim.apply(make_policy("fcfs", scenario=sc).decide(sim.snapshot()))
    while sim.records[0].status is not JobStatus.FINISHED:
        sim.advance()
    assert abs(fork.records[0].finish_s - sim.records[0].finish_s) < 1e-6
