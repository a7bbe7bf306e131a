"""Fit the estimator's calibration constants on the calibration split of the measurements.

Reads measurements in the schema (docs/measurement_schema.md) — by default the public Arena
measured table and Megatron-LM Table 1 — fits, per framework, the constants of
crius_gym/perf/calibration.py on the rows whose ``split`` is ``calibration``, and writes them
(atomically) with the command that produced them.  Held-out rows are never seen here; see
experiments/validate_estimator.py for the held-out error.

The default output is results/calibration.yaml, never the packaged calibration that every
scenario reads: install a checked fit with --out crius_gym/data/calibration.yaml --force. An
existing file is overwritten only with --force. A framework of crius_gym/data/frameworks.yaml
without calibration rows keeps its packaged constants (said in the file), so the file always
serves every scenario.

A partial refit (--base FILE --refit NAME ...) starts from FILE's constants and fits only the
named ones, the others keeping FILE's values: how the packaged Alpa constants were made, the
compute curves of the fit before the convolution terms kept and the constants those terms
price refitted (docs/estimator.md, "Calibration"):

    git show de70df2:crius_gym/data/calibration.yaml > base.yaml
    python experiments/calibrate_estimator.py --base base.yaml --refit alpa:family.wide_resnet \
        alpa:wave_elements alpa:intra_link_efficiency alpa:a10.inter_node_efficiency \
        alpa:a100-40gb.inter_node_efficiency alpa:a40.inter_node_efficiency \
        alpa:v100-32gb.inter_node_efficiency \
        --out crius_gym/data/calibration.yaml --force

A framework none of whose free constants is named keeps FILE's constants.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
from pathlib import Path

import yaml

from crius_gym.atomic import atomic_write_text
from crius_gym.cli import add_data_dir_option, run_main
from crius_gym.errors import CriusGymError, InputFileError, RunStateError
from crius_gym.perf.calibration import Calibration, GPUCalibration, load_calibrations
from crius_gym.perf.fit import (
    default_parameters,
    fit_calibration,
    prior_calibration,
    refit_parameters,
)
from crius_gym.perf.framework import get_framework, load_frameworks
from crius_gym.perf.layers import model_costs
from crius_gym.perf.public_tables import load_measurements
from crius_gym.provenance import Provenance

DEFAULT_OUT = Path("results") / "calibration.yaml"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--measurements",
        action="append",
        metavar="PATH",
        help="measurement CSV in the schema (repeatable); default: the public Arena "
        "and Megatron-LM sets from the data directory",
    )
    add_data_dir_option(p)
    p.add_argument(
        "--out",
        default=str(DEFAULT_OUT),
        metavar="PATH",
        help="calibration YAML to write (default: results/calibration.yaml; the packaged one "
        "is crius_gym/data/calibration.yaml)",
    )
    p.add_argument(
        "--force", action="store_true", help="overwrite --out if it exists (never by default)"
    )
    p.add_argument(
        "--base",
        metavar="PATH",
        help="calibration YAML to start from (default: the fixed priors; needed by --refit)",
    )
    p.add_argument(
        "--refit",
        nargs="+",
        metavar="NAME",
        help="fit only these constants (e.g. a40.inter_node_efficiency, family.wide_resnet, "
        "wave_elements; prefix FRAMEWORK: to name one framework's, e.g. "
        "alpa:intra_link_efficiency), the others keeping --base's values; an unknown name is "
        "refused with the list of the constants",
    )
    args = p.parse_args()
    if args.refit and not args.base:
        p.error("--refit needs --base (the constants the others keep)")
    return args


def _refit_names(names: list[str]) -> list[tuple[str | None, str]]:
    """(framework or None, constant) of each --refit name (``alpa:wave_elements``)."""
    out: list[tuple[str | None, str]] = []
    for n in names:
        fw, sep, rest = n.partition(":")
        out.append((fw, rest) if sep else (None, n))
    return out


def _bases(path: str, rows: list) -> dict[str, Calibration]:
    """Each framework's starting constants from a calibration YAML.

    A family whose layers are all priced kernel by kernel (Wide-ResNet) has no work scale in
    the current model: one kept from an older file is dropped.
    """
    cals = load_calibrations(path)
    by_kernel = {
        m.model.family for m in rows if all(x.kernels for x in model_costs(m.model).layers)
    }
    return {
        name: dataclasses.replace(
            cal,
            family_work_scale={
                f: v for f, v in cal.family_work_scale.items() if f not in by_kernel
            },
        )
        for name, cal in cals.items()
    }


def _default_gpu(cal: Calibration) -> GPUCalibration:
    """Median of the fitted GPU types: the constants of GPU types without measurements."""
    fitted = list(cal.gpus.values())
    return GPUCalibration(
        eta_max=statistics.median(g.eta_max for g in fitted),
        work_half_gflop=statistics.median(g.work_half_gflop for g in fitted),
        inter_node_efficiency=statistics.median(g.inter_node_efficiency for g in fitted),
    )


def main() -> None:
    args = parse_args()
    prov = Provenance.capture()
    target = Path(args.out)
    if target.exists() and not args.force:
        raise RunStateError(f"{target}: exists; pass --force to overwrite it")
    rows = load_measurements(args.measurements, args.data_dir)
    out: dict[str, object] = {}
    lines = []
    profiles = load_frameworks()
    bases = _bases(args.base, rows) if args.base else None
    if args.refit:
        known = {
            p.name
            for fw in {m.framework for m in rows}
            for p in default_parameters(fw, [m for m in rows if m.framework == fw])
        }
        unknown = [n for _, n in _refit_names(args.refit) if n not in known]
        if unknown:
            raise CriusGymError(
                f"--refit: not free constants of any framework: {', '.join(unknown)}; "
                f"known: {', '.join(sorted(known))}"
            )
    for fw_name in sorted({m.framework for m in rows}):
        cal_rows = [m for m in rows if m.framework == fw_name and m.split == "calibration"]
        lender = profiles[fw_name].calibration
        if cal_rows and lender != fw_name:
            first = cal_rows[0]
            raise InputFileError(
                first.source_file,
                f"framework {fw_name} uses the calibration of {lender} "
                "(crius_gym/data/frameworks.yaml); its rows can only be held out",
                row=first.line,
                field="split",
            )
        if not cal_rows:
            print(f"{fw_name}: no calibration rows, skipped")
            continue
        start = bases[fw_name] if bases is not None else prior_calibration(fw_name)
        params = None
        if args.refit:
            free = {p.name for p in default_parameters(fw_name, cal_rows)}
            named = [n for fw, n in _refit_names(args.refit) if fw in (None, fw_name) and n in free]
            if not named:
                out[fw_name] = start.to_dict()
                line = f"{fw_name}: no constant of --refit is free here; --base's constants kept"
                print(line)
                lines.append(line)
                continue
            params = refit_parameters(fw_name, cal_rows, start, named)
        print(f"{fw_name}: fitting on {len(cal_rows)} calibration rows ...", flush=True)
        result = fit_calibration(get_framework(fw_name), start, cal_rows, params)
        cal = result.calibration
        cal = Calibration(**{**cal.__dict__, "default_gpu": _default_gpu(cal)})
        out[fw_name] = cal.to_dict()
        line = (
            f"{fw_name}: {result.rows_used} rows fitted ({result.rows_infeasible} measured-ok "
            f"rows with no feasible plan excluded), {len(result.parameters)} constants, "
            f"training MAPE {100 * result.train_mape:.1f}%, median "
            f"{100 * result.train_median:.1f}%, {result.evaluations} evaluations"
        )
        print(line)
        lines.append(line)
    if not out:
        raise CriusGymError(
            "no calibration rows in the measurements (split 'calibration'); nothing written"
        )
    # Frameworks without calibration rows keep the packaged constants, so the file still
    # serves every scenario (a partial file would break the scenarios of the others).
    packaged = load_calibrations()
    own = {name for name, p in profiles.items() if p.calibration == name}
    for fw_name in sorted(own - set(out)):
        out[fw_name] = packaged[fw_name].to_dict()
        line = f"{fw_name}: no calibration rows; the packaged constants are kept"
        print(line)
        lines.append(line)
    header = "\n".join(
        [
            "# Estimator calibration constants (see crius_gym/perf/calibration.py).",
            f"# {prov.markdown()}",
            "# Fitted on the rows whose split is 'calibration' (Arena: alternate rows within each",
            "# (GPU type, model family) stratum in file order; Megatron-LM: alternate Table 1",
            "# rows, 1.7B, 7.5B, 39.1B, 145.6B, 529.6B). megatron-deepspeed uses megatron's.",
            "# default_gpu: median of the fitted GPU types, for GPU types without measurements.",
            *[f"# {x}" for x in lines],
            "",
        ]
    )
    atomic_write_text(args.out, header + yaml.safe_dump({"frameworks": out}, sort_keys=False))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    run_main(main)
