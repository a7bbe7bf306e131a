"""Pass 1: blockers preempt the opportunistic jobs behind them.

Part of :mod:`crius_gym.policies.crius` (its docstring has the algorithm).
"""

from __future__ import annotations

from crius_gym.policies.crius.ledger import Held, Ledger
from crius_gym.policies.crius.options import CriusOptions
from crius_gym.workload.job import Job

# Pass 1: blockers preempt the opportunistic jobs behind them


def restart_blockers(ledger: Ledger, opts: CriusOptions) -> None:
    """Start waiting jobs that fit on idle GPUs plus those of later-arrived (opportunistic) jobs.

    Walks the queue in FIFO order and starts over from the head after each start, as the
    authors' ``pending_jobs_restart_trial``; at most ``max_blocker_trials`` placements are tried.
    """
    trials = 0
    restart = True
    while restart and trials < opts.max_blocker_trials:
        restart = False
        for index in list(ledger.waiting):
            if index in ledger.preempted:
                continue
            job = ledger.snapshot.job(index).job
            quota = ledger.speeds.quota(job, ledger.snapshot)
            if quota is None:
                continue
            later, later_gpus = ledger.on_type(quota[0]).later_than(index)
            if not later or ledger.alloc.free_gpus(quota[0]) + later_gpus < quota[1]:
                continue
            trials += 1
            victims = _fewest_victims(ledger, job, quota, later)
            if victims is not None:
                for victim in victims:
                    ledger.preempt(victim)
                option = ledger.speeds.first_fit(ledger.fit, job, *quota)
                assert option is not None
                ledger.start(index, option)
                restart = True
                break
            if trials >= opts.max_blocker_trials:
                break


def _fewest_victims(
    ledger: Ledger, job: Job, quota: tuple[str, int], later: list[Held]
) -> list[int] | None:
    """A minimal set of ``later`` jobs whose GPUs let ``job`` fit, latest arrivals first.

    Releases the latest arrivals until the job fits, then keeps running every released job
    (earliest first) that the job does not need.  None when even all of them are not enough.
    """
    alloc = ledger.alloc.copy()
    released: list[Held] = []
    for h in reversed(later):
        alloc.release(h.placement)
        released.append(h)
        if ledger.speeds.first_fit(alloc, job, *quota) is not None:
            break
    else:
        return None
    needed = []
    for h in reversed(released):
        alloc.take(h.placement)
        if ledger.speeds.first_fit(alloc, job, *quota) is None:
            alloc.release(h.placement)
            needed.append(h.index)
    return sorted(needed, reverse=True)
