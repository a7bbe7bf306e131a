"""The public measurement tables, converted to the measurement schema.

The Arena artifact's measured iteration times (with its model configurations) and Megatron-LM's
Table 1 live in the public data directory (``CRIUS_GYM_DATA``) in their own layouts; the
converters map each row to the schema of :mod:`crius_gym.perf.measurements`
(``docs/measurement_schema.md``), keeping the row's physical line in its source file so that
every error names the line an editor shows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from crius_gym.csvlines import records_with_lines
from crius_gym.errors import InputFileError, utf8_text
from crius_gym.hardware.gpus import GPUCatalog
from crius_gym.perf.measurements import (
    ARCH_COLUMNS,
    Measurement,
    Split,
    int_field,
    parse_measurement_row,
    read_measurements,
)

LINE_KEY = "_line"  # a converted row's physical line in its source file (not a column)


def _read_csv(path: str | Path) -> list[dict[str, str]]:
    """The rows of a public table, each with its first physical line under ``LINE_KEY``.

    Raises:
        InputFileError: the file is empty, or a row has more fields than the header.
    """
    with utf8_text(path), open(path, newline="", encoding="utf-8") as fh:
        records = records_with_lines(fh, comments=True)
        first = next(records, None)
        if first is None:
            raise InputFileError(str(path), "file is empty")
        header = [h.strip() for h in first[1]]
        out = []
        for line, record in records:
            if len(record) > len(header):
                raise InputFileError(
                    str(path), f"row has {len(record)} fields, the header {len(header)}", row=line
                )
            row = {h: (record[i] if i < len(record) else "") for i, h in enumerate(header)}
            out.append({**row, LINE_KEY: str(line)})
        return out


def first_data_line(path: str | Path) -> int:
    """1-based line of the first data row (after leading ``#`` comments and the header)."""
    with utf8_text(path), open(path, encoding="utf-8") as fh:
        comments = 0
        for line in fh:
            if not line.startswith("#"):
                break
            comments += 1
    return comments + 2


def _column(row: dict[str, str], key: str, path: str | Path) -> str:
    """A required column of a public table's row, or an error naming file, line and field."""
    if key not in row:
        raise InputFileError(str(path), "missing column", row=int(row[LINE_KEY]), field=key)
    return row[key]


def _stratified_split(keys: Sequence[tuple[str, ...]]) -> list[Split]:
    """Alternate calibration/holdout within each stratum, in file order (deterministic)."""
    seen: dict[tuple[str, ...], int] = defaultdict(int)
    out: list[Split] = []
    for k in keys:
        out.append("calibration" if seen[k] % 2 == 0 else "holdout")
        seen[k] += 1
    return out


def convert_arena(measured_csv: str | Path, model_configs_csv: str | Path) -> list[dict[str, str]]:
    """Rows of the Arena measured table (``arena/measured_iteration_times.csv``) in the schema.

    Split: within each (GPU type, model family) stratum, in file order, rows alternate between
    calibration and holdout, starting with calibration (about 50/50, deterministic).
    """
    configs = {
        tuple(_column(r, c, model_configs_csv) for c in ("model_family", "model_size")): r
        for r in _read_csv(model_configs_csv)
    }
    rows = _read_csv(measured_csv)
    out: list[dict[str, str]] = []
    strata = []
    for r in rows:
        for column in ("model_family", "model_size", "status", "global_batch", "gpu_type"):
            _column(r, column, measured_csv)
        key = (r["model_family"], r["model_size"])
        if key not in configs:
            raise InputFileError(
                str(measured_csv),
                f"model {key[0]} {key[1]} absent from {model_configs_csv}",
                row=int(r[LINE_KEY]),
                field="model_size",
            )
        cfg = configs[key]
        ok = r["status"].strip() == "ok"
        out.append(
            {
                "model_family": r["model_family"],
                "model_name": f"{r['model_family']}-{r['model_size'].lower()}",
                **{c: cfg.get(c, "") for c in ARCH_COLUMNS},
                "dtype": cfg["dtype"],
                "global_batch": r["global_batch"],
                "gpu_type": r["gpu_type"],
                "num_nodes": r["num_nodes"],
                "gpus_per_node": r["gpus_per_node"],
                "framework": "alpa",
                "measured_iter_time_s": r["iter_time_s"] if ok else "",
                "status": "ok" if ok else "oom",
                "source": "arena:measured_iteration_times.csv",
                LINE_KEY: r[LINE_KEY],
            }
        )
        strata.append((r["gpu_type"], r["model_family"]))
    for row, split in zip(out, _stratified_split(strata), strict=True):
        row["split"] = split
    return out


def convert_megatron_table1(table_csv: str | Path) -> list[dict[str, str]]:
    """Rows of Megatron-LM Table 1 (``megatron_table1.csv``) in the schema.

    The iteration time is the file's ``iter_time_s_derived`` (Eq. 3 FLOPs / achieved FLOP/s).
    Nodes are DGX A100 80 GB with 8 GPUs and 8 HDR InfiniBand NICs; full recomputation, no
    sequence parallelism and no distributed optimizer (both came later); the microbatch size
    and interleaving are not published and are searched.  Split: alternate rows, the first,
    third, … (1.7B, 7.5B, 39.1B, 145.6B, 529.6B) calibrate and the others are held out. The
    first five rows alone keep h²/t nearly constant (4.2–8.4·10⁶), so they cannot identify how
    efficiency grows with the per-GPU GEMM size; alternate rows span 1.7B–1T in both halves,
    as the Arena table's alternate split does.
    """
    out = []
    for i, r in enumerate(_read_csv(table_csv)):
        line = int(r[LINE_KEY])
        n = int_field(_column(r, "num_gpus", table_csv), str(table_csv), line, "num_gpus")
        out.append(
            {
                "model_family": "gpt",
                "model_name": f"gpt-{r['params_billion']}b",
                "hidden_size": r["hidden_size"],
                "num_layers": r["num_layers"],
                "num_heads": r["attention_heads"],
                "seq_len": r["seq_len"],
                "vocab_size": r["vocab"],
                "dtype": "fp16",
                "global_batch": r["global_batch"],
                "gpu_type": "a100-80gb",
                "num_nodes": str(n // 8),
                "gpus_per_node": "8",
                "tensor_parallel": r["tensor_parallel"],
                "pipeline_parallel": r["pipeline_parallel"],
                "activation_recompute": "true",
                "sequence_parallel": "false",
                "distributed_optimizer": "false",
                "framework": "megatron",
                "measured_iter_time_s": r["iter_time_s_derived"],
                "status": "ok",
                "split": "calibration" if i % 2 == 0 else "holdout",
                "inter_link": "ib-hdr",
                "nics_per_node": "8",
                "source": "megatron_table1.csv",
                LINE_KEY: r[LINE_KEY],
            }
        )
    return out


def rows_to_measurements(
    rows: Sequence[dict[str, str]], source_file: str | Path, catalog: GPUCatalog | None = None
) -> list[Measurement]:
    """Validate converted rows; errors name ``source_file`` and the row's physical line in it.

    The converters give each row its line (``LINE_KEY``); rows from elsewhere are numbered from
    the file's first data line, in order.
    """
    start = first_data_line(source_file)
    return [
        parse_measurement_row(r, str(source_file), int(r.get(LINE_KEY) or start + i), catalog)
        for i, r in enumerate(rows)
    ]


def load_public_measurements(data_dir: str | Path | None = None) -> list[Measurement]:
    """The Arena measured table and Megatron-LM Table 1, converted to the schema.

    Raises:
        FileNotFoundError: a public file is absent (naming it and ``CRIUS_GYM_DATA``).
    """
    from crius_gym import datasets

    arena = datasets.data_file(datasets.ARENA_MEASUREMENTS, data_dir)
    configs = datasets.data_file(datasets.ARENA_MODEL_CONFIGS, data_dir)
    megatron = datasets.data_file(datasets.MEGATRON_TABLE1, data_dir)
    return [
        *rows_to_measurements(convert_arena(arena, configs), arena),
        *rows_to_measurements(convert_megatron_table1(megatron), megatron),
    ]


def load_measurements(
    paths: Sequence[str | Path] | None = None, data_dir: str | Path | None = None
) -> list[Measurement]:
    """Measurements from schema CSVs, or the public sets when ``paths`` is empty or None."""
    if not paths:
        return load_public_measurements(data_dir)
    out: list[Measurement] = []
    for p in paths:
        out.extend(read_measurements(p))
    return out
