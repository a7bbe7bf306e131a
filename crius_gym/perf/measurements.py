"""Measured iteration times in one CSV schema, with converters from the public sets.

Schema (one row per measured configuration; ``docs/measurement_schema.md`` is the reference):

========================  ======================================================================
column                    meaning
========================  ======================================================================
model_family              ``bert``, ``gpt``, ``llama``, ``moe`` or ``wide_resnet`` (required)
model_name                label, e.g. ``bert-1.3b`` (optional; used in reports)
hidden_size … num_classes architecture columns of the family (blank where not applicable):
                          ``hidden_size, num_layers, num_heads, seq_len, vocab_size,
                          num_experts, expert_group_size, resnet_layers, width_factor,
                          num_channels, image_size, num_classes``
dtype                     ``fp16``, ``bf16`` or ``fp32`` (required)
global_batch              samples per iteration (required)
gpu_type                  GPU catalogue name or alias (required)
num_nodes, gpus_per_node  layout (required)
tensor_parallel,          plan columns; blank = searched by the estimator inside the Cell
pipeline_parallel,        (``activation_recompute``: ``none``, ``selective`` or ``full``, with
microbatch_size,          ``true``/``false`` as aliases of ``full``/``none``;
activation_recompute,     ``sequence_parallel``, ``distributed_optimizer``: ``true``/``false``)
interleave,
sequence_parallel,
distributed_optimizer
framework                 ``alpa``, ``megatron`` or ``megatron-deepspeed`` (required; the
                          profiles of ``data/frameworks.yaml``)
measured_iter_time_s      seconds; blank when status is ``oom`` or ``failed``
status                    ``ok``, ``oom`` or ``failed`` (blank = ``ok``)
split                     ``calibration`` or ``holdout`` (blank = ``holdout``)
inter_link, nics_per_node optional network of the measured cluster (default ``ib-hdr``, 1)
source                    where the row comes from (optional)
========================  ======================================================================
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from crius_gym.csvlines import records_with_lines
from crius_gym.errors import ConfigError, InputFileError, UnknownNameError, utf8_text
from crius_gym.hardware.cluster import NodeGroup
from crius_gym.hardware.gpus import GPUCatalog, load_gpu_catalog
from crius_gym.perf.framework import load_frameworks
from crius_gym.perf.plan import Layout, Recompute
from crius_gym.wholenumbers import parse_whole
from crius_gym.workload.models import FAMILIES, ModelSpec, build_model

ARCH_COLUMNS = (
    "hidden_size",
    "num_layers",
    "num_heads",
    "seq_len",
    "vocab_size",
    "num_experts",
    "expert_group_size",
    "resnet_layers",
    "width_factor",
    "num_channels",
    "image_size",
    "num_classes",
)
PLAN_COLUMNS = (
    "tensor_parallel",
    "pipeline_parallel",
    "microbatch_size",
    "activation_recompute",
    "interleave",
    "sequence_parallel",
    "distributed_optimizer",
)
COLUMNS = (
    "model_family",
    "model_name",
    *ARCH_COLUMNS,
    "dtype",
    "global_batch",
    "gpu_type",
    "num_nodes",
    "gpus_per_node",
    *PLAN_COLUMNS,
    "framework",
    "measured_iter_time_s",
    "status",
    "split",
    "inter_link",
    "nics_per_node",
    "source",
)
REQUIRED = (
    "model_family",
    "dtype",
    "global_batch",
    "gpu_type",
    "num_nodes",
    "gpus_per_node",
    "framework",
)
Status = Literal["ok", "oom", "failed"]
Split = Literal["calibration", "holdout"]


@dataclass(frozen=True)
class Measurement:
    """One measured (or failed) configuration.

    Attributes:
        line: line number in its file (header = 1).
        source_file: the CSV it came from.
        model: architecture record built from the row.
        model_name: label for reports.
        global_batch: samples per iteration.
        gpu_type: canonical GPU name.
        layout: nodes × GPUs per node.
        framework: a profile of ``data/frameworks.yaml`` (``alpa``, ``megatron``, …).
        tensor_parallel: fixed TP degree or None (searched).
        pipeline_parallel: fixed stage count or None (searched).
        microbatch_size: fixed per-replica microbatch size or None.
        recompute: fixed recomputation mode or None.
        interleave: fixed interleaving degree or None.
        sequence_parallel: fixed sequence parallelism or None.
        distributed_optimizer: fixed optimizer sharding over data parallelism or None.
        measured_s: measured iteration time, seconds (None when not ``ok``).
        status: ``ok``, ``oom`` or ``failed``.
        split: ``calibration`` or ``holdout``.
        inter_link: network of the measured cluster.
        nics_per_node: NICs per node.
        source: provenance label.
        raw: the row as read (schema columns → text), for reports that keep input rows.
    """

    line: int
    source_file: str
    model: ModelSpec
    model_name: str
    global_batch: int
    gpu_type: str
    layout: Layout
    framework: str
    tensor_parallel: int | None
    pipeline_parallel: int | None
    microbatch_size: int | None
    recompute: Recompute | None
    interleave: int | None
    sequence_parallel: bool | None
    distributed_optimizer: bool | None
    measured_s: float | None
    status: Status
    split: Split
    inter_link: str
    nics_per_node: int
    source: str
    raw: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def num_gpus(self) -> int:
        """GPUs of the measured layout."""
        return self.layout.num_gpus

    @property
    def multi_node(self) -> bool:
        """The layout spans more than one node."""
        return self.layout.num_nodes > 1

    def node_group(self, catalog: GPUCatalog | None = None) -> NodeGroup:
        """The measured cluster as a node group (default intra-node link of the GPU type)."""
        cat = catalog or load_gpu_catalog()
        gpu = cat.gpu(self.gpu_type)
        return NodeGroup(
            gpu=gpu,
            num_nodes=self.layout.num_nodes,
            gpus_per_node=self.layout.gpus_per_node,
            intra_link=gpu.intra_link,
            inter_link=cat.link(self.inter_link),
            nics_per_node=self.nics_per_node,
        )


def int_field(value: str, path: str, line: int, field: str, *, positive: bool = True) -> int:
    """An integer field of a row (``2.5`` is refused, not read as 2).

    Raises:
        InputFileError: not a number, not whole, or (``positive``) below 1; naming the field.
    """
    try:
        f = float(value)
    except ValueError:
        raise InputFileError(path, f"{value!r} is not a number", row=line, field=field) from None
    if not f.is_integer() or (positive and f < 1):
        raise InputFileError(path, f"{value!r} must be a positive integer", row=line, field=field)
    try:
        return parse_whole(value)  # exactly: a float has 53 bits
    except ValueError as exc:
        raise InputFileError(path, str(exc), row=line, field=field) from None


def _opt_int(row: dict[str, str], key: str, path: str, line: int) -> int | None:
    raw = (row.get(key) or "").strip()
    return None if raw == "" else int_field(raw, path, line, key)


def _opt_bool(row: dict[str, str], key: str, path: str, line: int) -> bool | None:
    raw = (row.get(key) or "").strip().lower()
    if raw == "":
        return None
    if raw in ("1", "true", "yes"):
        return True
    if raw in ("0", "false", "no"):
        return False
    raise InputFileError(path, f"{raw!r} is not true/false", row=line, field=key)


def _check_plan_fits(layout: Layout, tp: int | None, pp: int | None, path: str, line: int) -> None:
    """Refuse a plan that cannot exist on the row's GPUs (issue 37: rows physically possible).

    The data-parallel degree is what is left, ``num_gpus / (tp x pp)``, so tp x pp must divide
    the GPU count; a tensor-parallel group is part of one node or whole nodes, so tp divides
    ``gpus_per_node`` or is a multiple of it. (Not "at most a node": a published run in
    ``data/published_runs.csv`` measured tensor parallelism 16 over two 8-GPU nodes.)
    """
    gpus = layout.num_gpus
    per_node = layout.gpus_per_node
    if tp is not None and per_node % tp and tp % per_node:
        raise InputFileError(
            path,
            f"tensor_parallel {tp} neither divides gpus_per_node {per_node} nor is a multiple "
            "of it: a tensor-parallel group is part of one node or whole nodes",
            row=line,
            field="tensor_parallel",
        )
    if gpus % ((tp or 1) * (pp or 1)):
        raise InputFileError(
            path,
            f"tensor_parallel x pipeline_parallel = {(tp or 1) * (pp or 1)} does not divide the "
            f"{gpus} GPUs ({layout.num_nodes} nodes x {layout.gpus_per_node}): no whole "
            "data-parallel degree",
            row=line,
            field="pipeline_parallel" if pp is not None else "tensor_parallel",
        )


def parse_measurement_row(
    row: dict[str, str], path: str, line: int, catalog: GPUCatalog | None = None
) -> Measurement:
    """Validate one CSV row of the measurement schema.

    Raises:
        InputFileError: naming the file, line and field at fault.
    """
    cat = catalog or load_gpu_catalog()
    for key in REQUIRED:
        if not (row.get(key) or "").strip():
            raise InputFileError(path, "required value is blank", row=line, field=key)
    family = row["model_family"].strip()
    if family not in FAMILIES:
        raise InputFileError(
            path,
            f"unknown model family {family!r}; known: {', '.join(FAMILIES)}",
            row=line,
            field="model_family",
        )
    values: dict[str, str] = {k: row.get(k, "") or "" for k in (*ARCH_COLUMNS, "dtype")}
    values["num_filters"] = values.pop("num_channels")
    name = (row.get("model_name") or "").strip() or f"{family}-row{line}"
    try:
        model = build_model(name, family, values)
    except (ConfigError, UnknownNameError) as exc:
        field = next((c for c in ARCH_COLUMNS if c in str(exc)), "model_family")
        raise InputFileError(path, str(exc), row=line, field=field) from exc
    try:
        gpu_type = cat.canonical(row["gpu_type"])
    except UnknownNameError as exc:
        raise InputFileError(path, str(exc), row=line, field="gpu_type") from exc
    layout = Layout(
        int_field(row["num_nodes"], path, line, "num_nodes"),
        int_field(row["gpus_per_node"], path, line, "gpus_per_node"),
    )
    status_raw = (row.get("status") or "ok").strip().lower()
    if status_raw not in ("ok", "oom", "failed"):
        raise InputFileError(
            path, f"status {status_raw!r} not in ok/oom/failed", row=line, field="status"
        )
    status: Status = status_raw  # type: ignore[assignment]
    measured_raw = (row.get("measured_iter_time_s") or "").strip()
    measured: float | None = None
    if status == "ok":
        try:
            measured = float(measured_raw)
        except ValueError:
            raise InputFileError(
                path,
                f"{measured_raw!r} is not a time in seconds",
                row=line,
                field="measured_iter_time_s",
            ) from None
        if not math.isfinite(measured) or measured <= 0:
            raise InputFileError(
                path, "must be a positive number of seconds", row=line, field="measured_iter_time_s"
            )
    elif measured_raw:
        raise InputFileError(
            path, f"must be blank when status is {status}", row=line, field="measured_iter_time_s"
        )
    rc_raw = (row.get("activation_recompute") or "").strip().lower()
    recompute: Recompute | None
    if rc_raw == "":
        recompute = None
    elif rc_raw in ("1", "true", "full", "yes"):
        recompute = "full"
    elif rc_raw in ("0", "false", "none", "no"):
        recompute = "none"
    elif rc_raw == "selective":
        recompute = "selective"
    else:
        raise InputFileError(
            path,
            f"{rc_raw!r} is not none, selective or full (or true/false for full/none)",
            row=line,
            field="activation_recompute",
        )
    sequence_parallel = _opt_bool(row, "sequence_parallel", path, line)
    distributed_optimizer = _opt_bool(row, "distributed_optimizer", path, line)
    split_raw = (row.get("split") or "holdout").strip().lower()
    if split_raw not in ("calibration", "holdout"):
        raise InputFileError(
            path, f"split {split_raw!r} not in calibration/holdout", row=line, field="split"
        )
    inter = (row.get("inter_link") or "ib-hdr").strip()
    try:
        cat.link(inter)
    except UnknownNameError as exc:
        raise InputFileError(path, str(exc), row=line, field="inter_link") from exc
    framework = row["framework"].strip()
    known = load_frameworks()
    if framework not in known:
        raise InputFileError(
            path,
            f"framework {framework!r} not in {'/'.join(sorted(known))}",
            row=line,
            field="framework",
        )
    tp = _opt_int(row, "tensor_parallel", path, line)
    pp = _opt_int(row, "pipeline_parallel", path, line)
    _check_plan_fits(layout, tp, pp, path, line)
    return Measurement(
        line=line,
        source_file=path,
        model=model,
        model_name=name,
        global_batch=int_field(row["global_batch"], path, line, "global_batch"),
        gpu_type=gpu_type,
        layout=layout,
        framework=framework,
        tensor_parallel=tp,
        pipeline_parallel=pp,
        microbatch_size=_opt_int(row, "microbatch_size", path, line),
        recompute=recompute,
        interleave=_opt_int(row, "interleave", path, line),
        sequence_parallel=sequence_parallel,
        distributed_optimizer=distributed_optimizer,
        measured_s=measured,
        status=status,
        split=split_raw,  # type: ignore[arg-type]
        inter_link=inter,
        nics_per_node=_opt_int(row, "nics_per_node", path, line) or 1,
        source=(row.get("source") or "").strip(),
        raw={c: (row.get(c) or "") for c in COLUMNS},
    )


def read_measurements(path: str | Path, catalog: GPUCatalog | None = None) -> list[Measurement]:
    """Read a CSV in the measurement schema, keeping file order.

    Raises:
        InputFileError: the file is empty, lacks required columns, or a row is malformed (the
            error names the line and field).
    """
    p = str(path)
    with utf8_text(path), open(path, newline="", encoding="utf-8") as fh:
        records = records_with_lines(fh, comments=True)
        first = next(records, None)
        if first is None:
            raise InputFileError(p, "file is empty")
        header = first[1]
        missing = [c for c in (*REQUIRED, "measured_iter_time_s") if c not in header]
        if missing:
            raise InputFileError(p, f"missing column(s): {', '.join(missing)}")
        out = []
        for line, record in records:  # the line an editor shows, comments and all
            if len(record) > len(header):
                raise InputFileError(
                    p, f"row has {len(record)} fields, the header {len(header)}", row=line
                )
            row = {h: (record[i] if i < len(record) else None) for i, h in enumerate(header)}
            out.append(parse_measurement_row(row, p, line, catalog))  # type: ignore[arg-type]
        return out


def write_measurements_csv(rows: Iterable[dict[str, str]], path: str | Path) -> None:
    """Write rows (mappings over :data:`COLUMNS`) as a schema CSV."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS, extrasaction="raise")
        writer.writeheader()
        for row in rows:
            writer.writerow({c: row.get(c, "") for c in COLUMNS})


PUBLISHED_RUNS = "published_runs.csv"


def load_published_runs() -> list[Measurement]:
    """Published timings of large runs (``crius_gym/data/published_runs.csv``), for validation.

    Megatron-LM, Megatron-DeepSpeed (vTrain's ground truth, BLOOM), MT-NLG and Alpa runs with
    a citation per row (``docs/published_runs_sources.md``); every row is ``holdout``, so no
    fit ever sees them.
    """
    from importlib import resources

    with resources.as_file(resources.files("crius_gym") / "data" / PUBLISHED_RUNS) as path:
        return read_measurements(path)
