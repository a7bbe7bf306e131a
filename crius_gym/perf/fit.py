"""Fit the estimator's calibration constants to measured iteration times.

Least squares on log(predicted / measured) over the calibration rows (scipy's trust-region
reflective solver with bounds).  Each prediction is the best memory-feasible plan of the row's
Cell, so the fit sees the same min-over-plans the tuner uses.  Memory does not depend on the
constants, so rows the estimator calls infeasible stay out of the objective and are reported.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from crius_gym.errors import ConfigError
from crius_gym.hardware.cluster import NodeGroup
from crius_gym.perf.calibration import Calibration, GPUCalibration
from crius_gym.perf.estimator import Estimator
from crius_gym.perf.framework import FrameworkProfile
from crius_gym.perf.layers import model_costs
from crius_gym.perf.measurements import Measurement
from crius_gym.perf.plan import PlanConstraints, PlanEstimate


def constraints_of(m: Measurement) -> PlanConstraints:
    """The plan restrictions a measurement row states."""
    return PlanConstraints(
        pipeline=m.pipeline_parallel,
        tensor=m.tensor_parallel,
        microbatch_size=m.microbatch_size,
        recompute=m.recompute,
        interleave=m.interleave,
        sequence_parallel=m.sequence_parallel,
        distributed_optimizer=m.distributed_optimizer,
    )


def predict(
    estimator: Estimator, m: Measurement, group: NodeGroup | None = None
) -> PlanEstimate | None:
    """The estimator's best plan for a measurement row (None when nothing fits in memory)."""
    best, _ = estimator.search(
        m.model, m.global_batch, group or m.node_group(), m.layout, constraints_of(m)
    )
    return best


@dataclass(frozen=True)
class Parameter:
    """One fitted constant, fitted in log space.

    Attributes:
        name: ``<gpu>.eta_max``, ``<gpu>.work_half_gflop``, ``<gpu>.inter_node_efficiency``,
            ``intra_link_efficiency`` or ``family.<family>``.
        initial: starting value.
        lower: lower bound.
        upper: upper bound.
    """

    name: str
    initial: float
    lower: float
    upper: float


@dataclass(frozen=True)
class FitResult:
    """Outcome of a fit.

    Attributes:
        calibration: the fitted constants.
        parameters: names of the fitted constants.
        rows_used: calibration rows in the objective.
        rows_infeasible: calibration rows measured ``ok`` that no plan fits (excluded).
        train_mape: mean |error| on the rows used, fraction.
        train_median: median |error| on the rows used, fraction.
        evaluations: objective evaluations.
    """

    calibration: Calibration
    parameters: tuple[str, ...]
    rows_used: int
    rows_infeasible: int
    train_mape: float
    train_median: float
    evaluations: int


def prior_calibration(framework: str) -> Calibration:
    """Starting constants of a fit (fixed here so that re-running a fit gives the same result)."""
    return Calibration(
        framework=framework,
        gpus={},
        default_gpu=GPUCalibration(eta_max=0.45, work_half_gflop=50.0, inter_node_efficiency=0.3),
        intra_link_efficiency=0.5,
    )


def default_parameters(framework: str, rows: Sequence[Measurement]) -> list[Parameter]:
    """The free constants for a framework given its calibration rows.

    Per GPU type with rows: η_max and w_half; the inter-node efficiency only where multi-node
    rows exist.  Globally: the intra-node link efficiency, the activation traffic, and a
    compute-efficiency factor per model family other than the first family seen (the
    reference, factor 1); under Alpa a work scale per such family, except for families whose
    layers are all priced kernel by kernel (convolutions): their small-kernel slowdown is the
    occupancy floor, one wave size for all of them.
    """
    gpus = sorted({m.gpu_type for m in rows})
    multi = {m.gpu_type for m in rows if m.multi_node}
    params: list[Parameter] = []
    for g in gpus:
        params.append(Parameter(f"{g}.eta_max", 0.45, 0.02, 1.2))
        params.append(Parameter(f"{g}.work_half_gflop", 20.0, 0.01, 5000.0))
        if g in multi:
            params.append(Parameter(f"{g}.inter_node_efficiency", 0.3, 0.01, 1.0))
    params.append(Parameter("intra_link_efficiency", 0.5, 0.02, 1.0))
    params.append(Parameter("activation_traffic", 1.0, 0.001, 30.0))
    families = sorted({m.model.family for m in rows})
    by_kernel = {
        m.model.family for m in rows if all(x.kernels for x in model_costs(m.model).layers)
    }
    reference = "bert" if "bert" in families else families[0]
    for f in families:
        if f != reference:
            params.append(Parameter(f"family.{f}", 1.0, 0.2, 3.0))
            if framework == "alpa" and f not in by_kernel:
                params.append(Parameter(f"work_scale.{f}", 1.0, 0.01, 100.0))
    if by_kernel:
        params.append(Parameter("wave_elements", 1e6, 1e3, 1e9))
    return params


def current_value(cal: Calibration, name: str) -> float:
    """A constant of ``cal`` by its :class:`Parameter` name (``a40.eta_max``, ``family.moe`` …)."""
    if name in ("intra_link_efficiency", "activation_traffic", "wave_elements"):
        return float(getattr(cal, name))
    if name.startswith("family."):
        return cal.family(name.split(".", 1)[1])
    if name.startswith("work_scale."):
        return cal.work_scale(name.split(".", 1)[1])
    gpu, fld = name.rsplit(".", 1)
    return float(getattr(cal.gpu(gpu), fld))


def refit_parameters(
    framework: str, rows: Sequence[Measurement], base: Calibration, names: Sequence[str]
) -> list[Parameter]:
    """The named constants of :func:`default_parameters`, starting from ``base``'s values.

    For a partial refit: the constants not named keep ``base``'s values (e.g. the compute
    curves of an earlier fit while the constants a new model term prices are refitted).

    Raises:
        ConfigError: a name that is not one of the framework's free constants for ``rows``.
    """
    known = {p.name: p for p in default_parameters(framework, rows)}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(
            f"{framework}: not free constants here: {', '.join(unknown)}; "
            f"known: {', '.join(sorted(known))}"
        )
    out = []
    for n in names:
        p = known[n]
        start = min(max(current_value(base, n), p.lower), p.upper)
        out.append(Parameter(n, start, p.lower, p.upper))
    return out


def apply_parameters(
    base: Calibration, params: Sequence[Parameter], values: Sequence[float]
) -> Calibration:
    """A calibration with ``params`` set to ``values`` on top of ``base``."""
    gpu_fields: dict[str, dict[str, float]] = {}
    intra = base.intra_link_efficiency
    family = dict(base.family_efficiency)
    work_scale = dict(base.family_work_scale)
    traffic = base.activation_traffic
    wave = base.wave_elements
    for p, v in zip(params, values, strict=True):
        if p.name == "intra_link_efficiency":
            intra = v
        elif p.name == "wave_elements":
            wave = v
        elif p.name == "activation_traffic":
            traffic = v
        elif p.name.startswith("family."):
            family[p.name.split(".", 1)[1]] = v
        elif p.name.startswith("work_scale."):
            work_scale[p.name.split(".", 1)[1]] = v
        else:
            gpu, fld = p.name.rsplit(".", 1)
            gpu_fields.setdefault(gpu, {})[fld] = v
    gpus = dict(base.gpus)
    for gpu, flds in gpu_fields.items():
        cur = base.gpu(gpu)
        gpus[gpu] = GPUCalibration(
            eta_max=flds.get("eta_max", cur.eta_max),
            work_half_gflop=flds.get("work_half_gflop", cur.work_half_gflop),
            inter_node_efficiency=flds.get("inter_node_efficiency", cur.inter_node_efficiency),
        )
    return Calibration(
        framework=base.framework,
        gpus=gpus,
        default_gpu=base.default_gpu,
        intra_link_efficiency=intra,
        family_efficiency=family,
        family_work_scale=work_scale,
        activation_traffic=traffic,
        collective_latency_s=base.collective_latency_s,
        iteration_overhead_s=base.iteration_overhead_s,
        wave_elements=wave,
    )


def fit_calibration(
    framework: FrameworkProfile,
    base: Calibration,
    rows: Sequence[Measurement],
    params: Sequence[Parameter] | None = None,
) -> FitResult:
    """Fit constants on ``rows`` (those with status ``ok`` are used).

    Args:
        framework: the framework the rows were measured with.
        base: starting constants (also supplies those not fitted).
        rows: calibration rows.
        params: constants to fit; :func:`default_parameters` when None.

    Returns:
        The fitted calibration and its training error.
    """
    ok_rows = [m for m in rows if m.status == "ok" and m.measured_s]
    groups = [m.node_group() for m in ok_rows]
    plist = list(params) if params is not None else default_parameters(framework.name, ok_rows)
    x0 = np.log([p.initial for p in plist])
    lo = np.log([p.lower for p in plist])
    hi = np.log([p.upper for p in plist])
    # Feasibility does not depend on the constants: decide it once.
    probe = Estimator(framework, apply_parameters(base, plist, [p.initial for p in plist]))
    usable = [i for i, m in enumerate(ok_rows) if predict(probe, m, groups[i]) is not None]
    evaluations = 0

    def residuals(x: np.ndarray) -> np.ndarray:
        nonlocal evaluations
        evaluations += 1
        est = Estimator(framework, apply_parameters(base, plist, np.exp(x).tolist()))
        out = np.empty(len(usable))
        for k, i in enumerate(usable):
            m = ok_rows[i]
            best = predict(est, m, groups[i])
            assert best is not None and m.measured_s is not None
            out[k] = math.log(best.iter_time_s / m.measured_s)
        return out

    sol = least_squares(
        residuals,
        x0,
        bounds=(lo, hi),
        method="trf",
        loss="soft_l1",
        f_scale=0.1,
        diff_step=1e-3,
        max_nfev=400,
    )
    fitted = apply_parameters(base, plist, np.exp(sol.x).tolist())
    errs = [abs(math.exp(r) - 1) for r in residuals(sol.x)]
    return FitResult(
        calibration=fitted,
        parameters=tuple(p.name for p in plist),
        rows_used=len(usable),
        rows_infeasible=len(ok_rows) - len(usable),
        train_mape=statistics.fmean(errs) if errs else math.nan,
        train_median=statistics.median(errs) if errs else math.nan,
        evaluations=evaluations,
    )
