"""Pass 2: admission, with the bounded downgrade search.

Part of :mod:`crius_gym.policies.crius` (its docstring has the algorithm).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from crius_gym.policies.crius.ledger import Held, Ledger
from crius_gym.policies.crius.options import BOUND_SLACK_SAMPLES_S, TIE_SAMPLES_S, CriusOptions
from crius_gym.policies.crius.speeds import FitMemo, HistogramFit, Option
from crius_gym.sim.allocator import Allocator

# Pass 2: admission with the bounded downgrade search


@dataclass(slots=True)
class _Node:
    """A state of the downgrade search: changes to running jobs and the new job's quota."""

    alloc: Allocator
    changes: tuple[tuple[int, Option], ...]  # (running job, its new Cell) in order
    quota: tuple[str, int]
    delta: float  # summed throughput change of the changed running jobs, samples/s
    fit: FitMemo
    changed: frozenset[int]

    def key(self) -> _Key:
        return frozenset((i, id(o)) for i, o in self.changes), self.quota

    def with_quota(self, quota: tuple[str, int]) -> _Node:
        """The same changes with the new job at another quota (the allocation is shared)."""
        return _Node(self.alloc, self.changes, quota, self.delta, self.fit, self.changed)


@dataclass(slots=True)
class _Step:
    """A change to one running job from a search state, not yet applied (never mutated)."""

    parent: _Node
    delta: float  # the resulting state's summed throughput change, as :meth:`apply` gives
    victim: Held
    option: Option

    def key(self) -> _Key:
        """The key of the state it leads to."""
        pairs = [(i, id(o)) for i, o in self.parent.changes]
        pairs.append((self.victim.index, id(self.option)))
        return frozenset(pairs), self.parent.quota

    def new_changes(self) -> tuple[tuple[int, Option], ...]:
        """The changes to running jobs of the state it leads to."""
        return (*self.parent.changes, (self.victim.index, self.option))

    def fit(self) -> HistogramFit:
        """Fit checks at the new job's quota type in the state it leads to.

        Evaluating the state needs only that type's histogram, so the state is not built.
        """
        gpu_type = self.parent.quota[0]
        hist = self.parent.alloc.histogram_after_move(
            gpu_type, self.victim.placement, self.option.cell
        )
        return HistogramFit(gpu_type, hist)

    def apply(self) -> _Node:
        """The state it leads to (the victim on its new Cell in a copy of the allocation)."""
        node, h, option = self.parent, self.victim, self.option
        alloc = node.alloc.copy()
        alloc.release(h.placement)
        placed = alloc.place(option.cell)
        assert placed is not None
        return _Node(
            alloc,
            (*node.changes, (h.index, option)),
            node.quota,
            self.delta,
            FitMemo(alloc),
            node.changed | {h.index},
        )


@dataclass(slots=True)
class _Pending:
    """A victim change evaluated and left open: built only if the search expands it."""

    step: _Step


# A search state's identity: its changes to running jobs and the new job's quota.  A change is
# (job, id of its Option): a job's Options at a (type, count) are one cached tuple in the
# SpeedTable, so within a search an Option's identity is its Cell, and needs no Cell hash.
_Key = tuple[frozenset[tuple[int, int]], tuple[str, int]]
# A victim step: the state's throughput change after it, the victim and its new Cell.
_Pick = tuple[float, Held, Option]


@dataclass(frozen=True)
class _AdmitPlan:
    """Changes to running jobs (in order) and the Cell the new job starts on."""

    changes: tuple[tuple[int, Option], ...]
    option: Option
    gain: float  # summed throughput change including the new job, samples/s


class _DowngradeSearch:
    """Breadth-first search for room for one waiting job (the authors' ``job_downgrade_search``).

    Each step is one of: halve the new job's GPU count; move the new job to another GPU type
    with enough idle GPUs; halve one running job of a GPU type (among those with at least half
    the largest count there, the least throughput loss); move one running job of a type to
    another type with enough idle GPUs at the same count (the one freeing the most of what the
    new job lacks, then the best throughput change).  Steps on running jobs are tried on the new
    job's current type, and on another type only when a later step can still move the new job
    there.  After every step the new job is placed at its quota; a state where it fits at its
    preferred layout ends its branch.

    Args:
        ledger: the decision so far.
        opts: options.
        index: trace index of the waiting job.
        quota: its starting (GPU type, count).
        depth: search steps.
    """

    def __init__(
        self, ledger: Ledger, opts: CriusOptions, index: int, quota: tuple[str, int], depth: int
    ) -> None:
        self.ledger = ledger
        self.speeds = ledger.speeds
        self.opts = opts
        self.index = index
        self.job = ledger.snapshot.job(index).job
        self.quota = quota
        self.depth = depth
        self._best: dict[tuple[str, int], float] = {}  # the new job's best speed per quota

    def _best_at(self, quota: tuple[str, int]) -> float:
        """The new job's fastest option at a quota, samples/s (0: none)."""
        hit = self._best.get(quota)
        if hit is None:
            hit = self._best[quota] = self.speeds.best_throughput(self.job, *quota)
        return hit

    def run(self) -> _AdmitPlan | None:
        """The feasible plan with the largest summed throughput (None: nothing fits).

        Three shortcuts keep the result of the plain breadth-first search while building far
        fewer states when many jobs run (bounds in :meth:`_hopeless` and :meth:`_children`):

        * a victim change is evaluated from the histogram of the new job's quota type after it
          (:meth:`_Step.fit`), and its state is built only when the search expands it;
        * on the last step a child whose gain cannot beat the best plan is not built;
        * on the step before, a victim change none of whose states (itself or its children) can
          beat the best plan is kept unbuilt in the next frontier.  Such a state yields nothing
          when expanded; it only takes one of the ``max_search_nodes`` expansions if its branch
          does not end there, which is settled (by building it) only when that could change
          which states the budget reaches.
        """
        alloc = self.ledger.alloc.copy()
        root = _Node(alloc, (), self.quota, 0.0, FitMemo(alloc), frozenset())
        best, done = self._evaluate(root, None)
        frontier: list[_Node | _Step | _Pending] = [] if done else [root]
        seen = {root.key()}
        budget = self.opts.max_search_nodes
        expanded = 0
        for step in range(self.depth):
            remaining = self.depth - step
            nxt: list[_Node | _Step | _Pending] = []
            unsettled: list[_Step] = []  # hopeless states passed whose expansion is unknown
            for entry in frontier:
                if isinstance(entry, _Step):
                    unsettled.append(entry)
                    continue
                if unsettled and expanded + len(unsettled) >= budget:
                    expanded += sum(not self._ends(s) for s in unsettled)
                    unsettled = []
                if expanded >= budget:
                    break
                expanded += 1
                if isinstance(entry, _Pending):
                    entry = entry.step.apply()
                if remaining == 1 and best is not None:
                    best = self._evaluate_leaves(entry, best, seen)
                    continue
                for child in self._children(entry, remaining):
                    key = child.key()
                    if key in seen:
                        continue
                    seen.add(key)
                    if isinstance(child, _Step):
                        if remaining == 2 and best is not None and self._hopeless(child, best):
                            nxt.append(child)
                            continue
                        best, done = self._evaluate_step(child, best)
                        if not done:
                            nxt.append(_Pending(child))
                        continue
                    best, done = self._evaluate(child, best)
                    if not done:
                        nxt.append(child)
            frontier = nxt
        return best

    def _bar(self, best: _AdmitPlan) -> float:
        """The gain a state must be able to beat to matter, less a margin above rounding."""
        return best.gain + TIE_SAMPLES_S - BOUND_SLACK_SAMPLES_S

    def _hopeless(self, s: _Step, best: _AdmitPlan) -> bool:
        """Whether neither the state of a victim change nor any child of it can beat ``best``.

        Its children are one more step: the new job halved or on another type (same change),
        or one more victim of the new job's type shrunk (at least that type's least loss) or
        moved (at most its best move's gain).
        """
        speeds, job = self.speeds, self.job
        gpu_type, n = s.parent.quota
        victims = self.ledger.victims(gpu_type)
        own = speeds.best_throughput(job, gpu_type, n) + max(
            0.0, -victims.least_shrink_loss, victims.best_move_change
        )
        half = speeds.best_throughput(job, gpu_type, n // 2) if n > 1 else 0.0
        moved = speeds.best_elsewhere(job, gpu_type, n)
        return s.delta + max(own, half, moved) <= self._bar(best)

    def _ends(self, s: _Step) -> bool:
        """Whether a victim change's state ends its branch (so it takes no expansion)."""
        return self._evaluate_step(s, None)[1]

    def _evaluate_leaves(self, node: _Node, best: _AdmitPlan, seen: set[_Key]) -> _AdmitPlan:
        """Evaluate a node's children on the last step, skipping those that cannot win.

        A last-step child is never expanded, so it matters only if its gain can beat ``best``.
        Its gain is at most its throughput change plus the new job's fastest option at its
        quota; a child whose bound does not clear ``best`` is neither built nor evaluated.
        """
        current = [best]  # the bar rises as children improve the plan
        for child in self._children(node, 1, lambda: self._bar(current[0])):
            key = child.key()
            if key in seen:
                continue
            seen.add(key)
            if isinstance(child, _Node):
                plan = self._evaluate(child, current[0])
            else:
                plan = self._evaluate_step(child, current[0])
            assert plan[0] is not None  # evaluating never loses the best plan
            current[0] = plan[0]
        return current[0]

    def _evaluate(self, node: _Node, best: _AdmitPlan | None) -> tuple[_AdmitPlan | None, bool]:
        """Place the new job in a state; returns the better plan and whether the branch ends."""
        option = self.speeds.first_fit(node.fit, self.job, *node.quota)
        return self._judge(option, node.quota, node.delta, node, best)

    def _evaluate_step(self, s: _Step, best: _AdmitPlan | None) -> tuple[_AdmitPlan | None, bool]:
        """:meth:`_evaluate` of the state a victim change leads to, without building it."""
        option = self.speeds.first_fit(s.fit(), self.job, *s.parent.quota)
        return self._judge(option, s.parent.quota, s.delta, s, best)

    def _judge(
        self,
        option: Option | None,
        quota: tuple[str, int],
        delta: float,
        state: _Node | _Step,
        best: _AdmitPlan | None,
    ) -> tuple[_AdmitPlan | None, bool]:
        """The better plan and whether the branch ends, the new job on ``option`` in a state."""
        if option is None:
            return best, False
        gain = delta + option.throughput
        if self.opts.admit_requires_gain and gain <= 0:
            return best, True
        if best is None or gain > best.gain + TIE_SAMPLES_S:
            changes = state.changes if isinstance(state, _Node) else state.new_changes()
            best = _AdmitPlan(changes, option, gain)
        # A relaxed layout is a plan, but the search may still find a better one below it.
        return best, option is self.speeds.options(self.job, *quota)[0]

    def _children(
        self, node: _Node, remaining: int, bar: Callable[[], float] | None = None
    ) -> Iterator[_Node | _Step]:
        """Successor states in the search order (victim changes not yet applied).

        ``bar`` (last step only): the gain a child must be able to beat; a child whose bound (its
        throughput change plus the new job's fastest option at its quota) does not clear it is
        not built.
        """
        gpu_type, n = node.quota
        best_at = self._best_at

        def hopeless(delta: float, quota: tuple[str, int]) -> bool:
            return bar is not None and delta + best_at(quota) <= bar()

        if (
            self.opts.scaling
            and n > 1
            and self.speeds.options(self.job, gpu_type, n // 2)
            and not hopeless(node.delta, (gpu_type, n // 2))
        ):
            yield node.with_quota((gpu_type, n // 2))
        victim_types = [gpu_type]
        if self.opts.type_change:
            for other in self.speeds.gpu_types:
                if other == gpu_type or not self.speeds.options(self.job, other, n):
                    continue
                if node.alloc.free_gpus(other) >= n:
                    if not hopeless(node.delta, (other, n)):
                        yield node.with_quota((other, n))
                elif remaining >= 2:
                    victim_types.append(other)  # free it first, move the new job next step
        for vt in victim_types:
            if self.opts.scaling:
                victims = self.ledger.victims(vt)
                if not hopeless(node.delta - victims.least_shrink_loss, node.quota):
                    found = self._shrink_victim(node, vt)
                    if found is not None and not hopeless(found[0], node.quota):
                        yield _Step(node, *found)
            if self.opts.type_change:
                victims = self.ledger.victims(vt)
                if not hopeless(node.delta + victims.best_move_change, node.quota):
                    found = self._move_victim(node, vt)
                    if found is not None and not hopeless(found[0], node.quota):
                        yield _Step(node, *found)

    def _shrink_victim(self, node: _Node, gpu_type: str) -> _Pick | None:
        """Halve the running job of a type that loses the least throughput."""
        best: tuple[float, int, Held, Option] | None = None
        for bound, index, h in self.ledger.victims(gpu_type).shrink_pool(node.changed):
            if best is not None and (bound, index) >= best[:2]:
                break  # ranked by best-case loss: nothing below can lose less
            if index in node.changed:
                continue
            assert h.victim_bounds is not None  # set by the ranking
            opt = node.fit.first_released(h.placement, h.victim_bounds.half)
            if opt is None:
                continue
            loss = h.throughput - opt.throughput
            if best is None or (loss, index) < best[:2]:
                best = (loss, index, h, opt)
        if best is None:
            return None
        return node.delta + best[3].throughput - best[2].throughput, best[2], best[3]

    def _move_victim(self, node: _Node, gpu_type: str) -> _Pick | None:
        """Move a running job of a type to the other type where it fares best."""
        victims = self.ledger.victims(gpu_type)
        free = {u: node.alloc.free_gpus(u) for u in victims.others}
        lacking = max(1, node.quota[1] - node.alloc.free_gpus(gpu_type))
        best: tuple[int, float, int, Held, Option] | None = None
        move, count_end = victims.move, victims.count_end
        k = victims.movable_from(max(free.values(), default=0))
        while k < len(move):
            neg_n, neg_bound, index, h, targets = move[k]
            freed = min(-neg_n, lacking)
            if best is not None:
                if freed < best[0]:
                    break  # ranked by count: nothing below frees as much
                if freed == best[0] and -neg_bound <= best[1]:
                    k = count_end[k]  # nor can the rest of this count
                    continue
            k += 1
            if index in node.changed:
                continue
            for u, bound, options in targets:
                if free[u] < h.num_gpus:
                    continue
                if best is not None and freed == best[0] and bound <= best[1]:
                    continue  # even its fastest Cell there would not beat the best move
                opt = node.fit.first(options)
                if opt is None:
                    continue
                change = opt.throughput - h.throughput
                if best is None or (freed, change) > best[:2]:
                    best = (freed, change, index, h, opt)
        if best is None:
            return None
        return node.delta + best[4].throughput - best[3].throughput, best[3], best[4]


def _commit(ledger: Ledger, index: int, plan: _AdmitPlan) -> None:
    for victim, option in plan.changes:
        ledger.reconfigure(victim, option)
    ledger.start(index, plan.option)


def admit_waiting(ledger: Ledger, opts: CriusOptions) -> None:
    """Start waiting jobs in FIFO order: quota placement, else the downgrade search.

    Later jobs backfill past one that does not fit (unless ``opportunistic`` is off).  Only the
    first ``max_searches`` jobs that need it get a downgrade search in one decision.
    """
    snapshot = ledger.snapshot
    speeds = ledger.speeds
    searches = 0
    depth = (
        opts.search_depth
        if len(ledger.held) <= opts.busy_threshold_jobs
        else opts.search_depth_busy
    )
    can_search = (opts.scaling or opts.type_change) and depth > 0
    for index in list(ledger.waiting):
        if index in ledger.preempted:
            continue
        job = snapshot.job(index).job
        quota = speeds.quota(job, snapshot)
        if quota is None:
            ledger.reject(index, speeds.unfit_reason)
            continue
        option = speeds.first_fit(ledger.fit, job, *quota)
        preferred = option is not None and option is speeds.options(job, *quota)[0]
        plan: _AdmitPlan | None = None
        if not preferred and can_search and searches < opts.max_searches:
            searches += 1
            plan = _DowngradeSearch(ledger, opts, index, quota, depth).run()
        if plan is not None:
            _commit(ledger, index, plan)
        elif option is not None:
            ledger.start(index, option)
        elif not opts.opportunistic:
            return  # strict FIFO: the head blocks the queue
