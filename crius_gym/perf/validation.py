"""Compare estimator predictions with measurements: per-row table and error summaries."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from crius_gym.perf.estimator import Estimator
from crius_gym.perf.fit import predict
from crius_gym.perf.measurements import PUBLISHED_RUNS, Measurement


def prediction_table(
    measurements: Sequence[Measurement], estimators: Mapping[str, Estimator]
) -> pd.DataFrame:
    """One row per measurement, in input order: the input columns plus the prediction.

    Added columns: ``predicted_iter_time_s`` (blank when no plan fits), ``predicted_plan``, the
    plan's ``pred_pipeline``/``pred_data``/``pred_tensor``/``pred_microbatches``/
    ``pred_recompute``/``pred_interleave``/``pred_sequence_parallel``/
    ``pred_distributed_optimizer``, ``predicted_memory_gb``,
    ``memory_limit_gb``, the breakdown (``compute_s`` … ``overhead_s``), ``error_pct`` (signed,
    predicted vs measured), ``unsupported`` (why the estimator cannot model the row's fixed
    plan, e.g. tensor parallelism across nodes; blank otherwise) and the derived grouping
    columns ``num_gpus``, ``multi_node``, ``dataset`` (``arena``, ``megatron`` — Table 1 or
    any other Megatron-LM or Megatron-DeepSpeed file — or ``published`` for the packaged
    published runs).
    """
    records = []
    for m in measurements:
        rec: dict[str, object] = dict(m.raw)
        # The parsed values, not the raw cells: a blank or absent optional column has a
        # documented default (status ok, split holdout) that every table groups by.
        rec["status"] = m.status
        rec["split"] = m.split
        best = predict(estimators[m.framework], m)
        rec["num_gpus"] = m.num_gpus
        rec["multi_node"] = m.multi_node
        if Path(m.source_file).name == PUBLISHED_RUNS:
            rec["dataset"] = "published"
        else:
            rec["dataset"] = "arena" if m.framework == "alpa" else "megatron"
        # The estimator keeps tensor parallelism inside a node (its all-reduces are priced on
        # the intra-node link): a fixed wider TP degree is outside the model, not an OOM.
        tp_across = m.tensor_parallel is not None and m.tensor_parallel > m.layout.gpus_per_node
        rec["unsupported"] = "tensor parallelism across nodes" if tp_across else ""
        if best is None:
            rec["predicted_iter_time_s"] = math.nan
            rec["predicted_plan"] = ""
        else:
            bd = best.breakdown
            rec.update(
                predicted_iter_time_s=best.iter_time_s,
                predicted_plan=str(best.plan),
                pred_pipeline=best.plan.pipeline,
                pred_data=best.plan.data,
                pred_tensor=best.plan.tensor,
                pred_microbatches=best.plan.microbatches,
                pred_recompute=best.plan.recompute,
                pred_interleave=best.plan.interleave,
                pred_sequence_parallel=best.plan.sequence_parallel,
                pred_distributed_optimizer=best.plan.distributed_optimizer,
                predicted_memory_gb=best.memory_gb,
                memory_limit_gb=best.memory_limit_gb,
                compute_s=bd.compute_s,
                intra_stage_comm_s=bd.intra_stage_comm_s,
                cross_stage_comm_s=bd.cross_stage_comm_s,
                bubble_s=bd.bubble_s,
                grad_sync_s=bd.grad_sync_s,
                optimizer_s=bd.optimizer_s,
                overhead_s=bd.overhead_s,
            )
        if m.measured_s is not None and best is not None:
            rec["error_pct"] = 100.0 * (best.iter_time_s / m.measured_s - 1.0)
        else:
            rec["error_pct"] = math.nan
        records.append(rec)
    return pd.DataFrame.from_records(records)


def error_summary(df: pd.DataFrame, by: str | None = None) -> pd.DataFrame:
    """MAPE, median |error| (percent) and Spearman ρ of rows measured ``ok`` and predicted.

    Args:
        df: a :func:`prediction_table`.
        by: optional grouping column.

    Returns:
        Columns ``rows``, ``mape_pct``, ``median_abs_pct``, ``p90_abs_pct``, ``spearman``.
    """
    ok = df[(df["status"].fillna("ok").replace("", "ok") == "ok") & df["error_pct"].notna()]

    def stats(g: pd.DataFrame) -> pd.Series:
        err = g["error_pct"].abs()
        meas = pd.to_numeric(g["measured_iter_time_s"])
        rho = spearmanr(meas, g["predicted_iter_time_s"]).statistic if len(g) > 2 else math.nan
        return pd.Series(
            {
                "rows": len(g),
                "mape_pct": err.mean(),
                "median_abs_pct": err.median(),
                "p90_abs_pct": float(np.percentile(err, 90)) if len(g) else math.nan,
                "spearman": rho,
            }
        )

    if by is None:
        return stats(ok).to_frame().T
    return ok.groupby(by, sort=True)[list(ok.columns)].apply(stats)


def oom_agreement(df: pd.DataFrame) -> dict[str, float]:
    """Agreement between measured status and the estimator's feasibility call.

    Returns:
        ``rows``, ``agreement`` (fraction of rows where "measured ok" equals "a plan fits"),
        ``oom_rows``, ``oom_called`` (measured OOM/failed rows the estimator calls infeasible),
        ``false_oom`` (measured ok rows the estimator calls infeasible).
    """
    if "unsupported" in df:  # rows the estimator cannot model say nothing about its OOM calls
        df = df[df["unsupported"].fillna("") == ""]
    measured_ok = df["status"].fillna("ok").replace("", "ok") == "ok"
    predicted_ok = df["predicted_iter_time_s"].notna()
    return {
        "rows": float(len(df)),
        "agreement": float((measured_ok == predicted_ok).mean()) if len(df) else math.nan,
        "oom_rows": float((~measured_ok).sum()),
        "oom_called": float((~measured_ok & ~predicted_ok).sum()),
        "false_oom": float((measured_ok & ~predicted_ok).sum()),
    }
