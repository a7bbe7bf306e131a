"""The assignment program of the throughput-maximising baselines (Gavel, Sia): HiGHS via scipy.

Each job gets at most one (GPU type, GPU count) configuration, maximising the summed value under
per-type GPU capacity; see :func:`assign`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Collection, Iterator, Mapping, Sequence

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from crius_gym.policies.data_parallel import Config

# Earlier jobs win ties in the assignment program: far below any real difference of value.
_FIFO_TIE_BREAK = 1e-4


@contextlib.contextmanager
def _quiet_native_stdout() -> Iterator[None]:
    """Silence what the HiGHS library prints to the process's stdout itself.

    Some HiGHS builds print debug lines (``HighsMipSolverData::transformNewIntegerFeasible
    Solution tmpSolver.run();``) whatever ``disp`` says; they would land in progress bars.
    """
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no real stdout (some embedded runners): nothing to silence
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def assign(
    values: Sequence[Mapping[Config, float]],
    must_assign: Sequence[bool],
    capacity: Mapping[str, int],
    limited: Sequence[Collection[Config]] | None = None,
    limit: int = 0,
    mip_rel_gap: float = 1e-3,
) -> list[Config | None] | None:
    """Give each job at most one configuration, maximising the summed value (HiGHS program).

    A generalised assignment: per-type GPU capacity, exactly one configuration for the jobs that
    must keep running, and optionally at most ``limit`` of the ``limited`` configurations (e.g.
    migrations).  Jobs with identical choices (same configurations, values and limits) are
    interchangeable, so they are solved as one class with an integer count per configuration:
    it shrinks the program several-fold on real queues and removes the symmetry that makes
    branch and bound slow.  Inside a class, earlier jobs get the higher-valued configurations,
    and classes whose first job is earlier win ties (FIFO).

    Args:
        values: per job, in priority order, the value of each allowed (GPU type, GPUs).
        must_assign: per job, whether it must get a configuration.
        capacity: GPUs of each type.
        limited: per job, the configurations that count toward ``limit``.
        limit: see ``limited``.
        mip_rel_gap: relative optimality gap at which HiGHS stops (deterministic, unlike a
            time limit).

    Returns:
        Per job its configuration (None: none); None when HiGHS found no solution.
    """
    classes: dict[tuple[bool, tuple[tuple[Config, float, bool], ...]], list[int]] = {}
    for k, vals in enumerate(values):
        lim = limited[k] if limited is not None else ()
        key = (bool(must_assign[k]), tuple(sorted((c, v, c in lim) for c, v in vals.items())))
        classes.setdefault(key, []).append(k)
    types = list(capacity)
    var_class, var_cfg, obj, size, gpus, type_row, in_limit = [], [], [], [], [], [], []
    for g, ((_, options), members) in enumerate(classes.items()):
        for cfg, value, is_limited in options:
            var_class.append(g)
            var_cfg.append(cfg)
            obj.append(value + _FIFO_TIE_BREAK * (len(classes) - g) / len(classes))
            size.append(len(members))
            gpus.append(cfg[1])
            type_row.append(len(classes) + types.index(cfg[0]))
            in_limit.append(is_limited)
    if not obj:
        return [None] * len(values)
    num_vars, num_classes = len(obj), len(classes)
    cols = np.arange(num_vars)
    rows = [np.array(var_class), np.array(type_row)]
    data = [np.ones(num_vars), np.array(gpus, dtype=float)]
    col_idx = [cols, cols]
    counts = np.array([len(m) for m in classes.values()], dtype=float)
    lower = [np.where([key[0] for key in classes], counts, 0.0), np.zeros(len(types))]
    upper = [counts, np.array([capacity[t] for t in types], dtype=float)]
    limited_vars = np.flatnonzero(in_limit)
    if limited is not None:
        rows.append(np.full(len(limited_vars), num_classes + len(types)))
        data.append(np.ones(len(limited_vars)))
        col_idx.append(limited_vars)
        lower.append(np.zeros(1))
        upper.append(np.array([float(limit)]))
    matrix = sparse.coo_array(
        (np.concatenate(data), (np.concatenate(rows), np.concatenate(col_idx))),
        shape=(num_classes + len(types) + (limited is not None), num_vars),
    ).tocsr()
    with _quiet_native_stdout():
        res = milp(
            -np.array(obj),
            integrality=np.ones(num_vars),
            bounds=Bounds(0, np.array(size, dtype=float)),
            constraints=LinearConstraint(matrix, np.concatenate(lower), np.concatenate(upper)),
            options={"mip_rel_gap": mip_rel_gap, "disp": False},
        )
    if res.x is None:
        return None
    chosen: list[Config | None] = [None] * len(values)
    taken = np.rint(res.x).astype(np.int64)
    class_of = np.array(var_class)
    for g, members in enumerate(classes.values()):
        slots = sorted(
            (-obj[i], var_cfg[i], int(taken[i]))
            for i in np.flatnonzero(class_of == g)
            if taken[i] > 0
        )
        queue = iter(members)
        for _, cfg, count in slots:
            for _ in range(count):
                chosen[next(queue)] = cfg
    return chosen
