"""Pass 3: upgrades on departures.

Part of :mod:`crius_gym.policies.crius` (its docstring has the algorithm).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from crius_gym.policies.crius.ledger import Held, Ledger
from crius_gym.policies.crius.options import TIE_SAMPLES_S, CriusOptions
from crius_gym.policies.crius.speeds import Option
from crius_gym.sim.allocator import Allocator

# Pass 3: upgrades on departures


def _pays_back(
    ledger: Ledger, h: Held, new_throughput: float, num_gpus: int, remaining_iters: float
) -> bool:
    """Whether finishing on the new Cell, pause included, beats staying put."""
    pause = ledger.snapshot.tuning_overhead_s(num_gpus, "pruned") + ledger.snapshot.restore_s
    saved_s = remaining_iters * h.job.global_batch * (1 / h.throughput - 1 / new_throughput)
    return saved_s > pause


# A candidate upgrade move: (minus its best-case gain in samples/s, job, target type, count),
# so that sorting ranks by best-case gain first.
_Upgrade = tuple[float, int, str, int]


class _UpgradeMoves:
    """The upgrade moves of the jobs movable when the pass starts, by the idle GPUs they need.

    Growing a job of n GPUs to 2n on its type, or moving it to another type at n, needs n idle
    GPUs of the target type.  Each round merges, best-case gain first, the groups whose type has
    that many idle GPUs now; a group is built the first time it opens.  Moves of a job changed
    since the pass started stay listed and are skipped by the pass (it is no longer movable).
    """

    def __init__(self, ledger: Ledger, opts: CriusOptions) -> None:
        self._speeds = ledger.speeds
        self._opts = opts
        self._by_count: dict[int, list[Held]] = {}
        for t in self._speeds.gpu_types:
            for h in ledger.on_type(t).jobs:
                self._by_count.setdefault(h.num_gpus, []).append(h)
        self._groups: dict[tuple[str, int], list[_Upgrade]] = {}

    def _group(self, u: str, n: int) -> list[_Upgrade]:
        hit = self._groups.get((u, n))
        if hit is not None:
            return hit
        speeds, opts = self._speeds, self._opts
        grow = opts.scaling and 2 * n <= speeds.max_gpus[u]
        out = []
        for h in self._by_count.get(n, ()):
            if h.cell.gpu_type == u:
                if not grow:
                    continue
                m = 2 * n
            elif opts.type_change:
                m = n
            else:
                continue
            gain = h.upgrade_gains(speeds)[u]
            if gain > opts.upgrade_min_gain:
                out.append((-gain, h.index, u, m))
        out.sort()
        self._groups[(u, n)] = out
        return out

    def ranked(self, alloc: Allocator) -> Iterator[_Upgrade]:
        """Moves whose target type has enough idle GPUs now, best-case gain first."""
        open_groups = [
            self._group(u, n)
            for u in self._speeds.gpu_types
            for n in self._by_count
            if alloc.free_gpus(u) >= n
        ]
        return heapq.merge(*open_groups)


def upgrade_pass(ledger: Ledger, opts: CriusOptions) -> None:
    """Apply up to ``max_upgrade_moves`` single best grow / type-change moves."""
    if opts.max_upgrade_moves == 0 or not (opts.scaling or opts.type_change):
        return
    moves = _UpgradeMoves(ledger, opts)
    for _ in range(opts.max_upgrade_moves):
        best: tuple[float, int, Option] | None = None
        for neg_bound, index, gpu_type, num_gpus in moves.ranked(ledger.alloc):
            if best is not None and -neg_bound <= best[0] + TIE_SAMPLES_S:
                break  # sorted by best-case gain: nothing below can beat the best found
            h = ledger.held[index]
            if not h.movable:
                continue
            option = _upgrade_fit(ledger, h, gpu_type, num_gpus)
            if option is None:
                continue
            gain = option.throughput - h.throughput
            if gain <= opts.upgrade_min_gain:
                continue
            if opts.charge_pause and not _pays_back(
                ledger, h, option.throughput, num_gpus, ledger.remaining_iters(h)
            ):
                continue
            if best is None or gain > best[0] + TIE_SAMPLES_S:
                best = (gain, index, option)
        if best is None:
            return
        ledger.reconfigure(best[1], best[2])


def _upgrade_fit(ledger: Ledger, h: Held, gpu_type: str, num_gpus: int) -> Option | None:
    if gpu_type == h.cell.gpu_type:
        return ledger.speeds.first_fit_released(ledger.fit, h.placement, h.job, num_gpus)
    return ledger.speeds.first_fit(ledger.fit, h.job, gpu_type, num_gpus)
