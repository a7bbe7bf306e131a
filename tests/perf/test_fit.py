"""The fit recovers constants from measurements the estimator itself generated (known answer)."""

import pytest

from crius_gym.errors import ConfigError
from crius_gym.perf.calibration import Calibration, GPUCalibration
from crius_gym.perf.estimator import Estimator
from crius_gym.perf.fit import (
    Parameter,
    current_value,
    fit_calibration,
    predict,
    prior_calibration,
    refit_parameters,
)
from crius_gym.perf.framework import get_framework
from crius_gym.perf.measurements import parse_measurement_row

TRUTH = Calibration(
    framework="alpa",
    gpus={"a100-40gb": GPUCalibration(0.55, 200.0, 0.5), "a40": GPUCalibration(0.40, 600.0, 0.1)},
    default_gpu=GPUCalibration(0.45, 50.0, 0.3),
    intra_link_efficiency=0.3,
    family_efficiency={"moe": 0.8},
)


def rows():
    out = []
    base = {"seq_len": "1024", "dtype": "fp16", "framework": "alpa", "split": "calibration"}
    shapes = [
        (
            "bert",
            {"hidden_size": "1536", "num_layers": "24", "num_heads": "16", "vocab_size": "51200"},
        ),
        (
            "moe",
            {
                "hidden_size": "1024",
                "num_layers": "16",
                "num_heads": "16",
                "vocab_size": "32000",
                "num_experts": "16",
                "expert_group_size": "2048",
            },
        ),
    ]
    for family, arch in shapes:
        for gpu in ("a100", "a40"):
            for nodes, gpn in ((1, 1), (1, 2), (2, 2), (4, 2)):
                for batch in (128, 512):
                    out.append(
                        {
                            **base,
                            **arch,
                            "model_family": family,
                            "gpu_type": gpu,
                            "num_nodes": str(nodes),
                            "gpus_per_node": str(gpn),
                            "global_batch": str(batch),
                            "measured_iter_time_s": "1",
                        }
                    )
    ms = [parse_measurement_row(r, "synthetic", i) for i, r in enumerate(out, start=2)]
    est = Estimator(get_framework("alpa"), TRUTH)
    labelled = []
    for m, r in zip(ms, out, strict=True):
        best = predict(est, m)
        if best is not None:
            labelled.append(
                parse_measurement_row(
                    {**r, "measured_iter_time_s": repr(best.iter_time_s)}, "synthetic", m.line
                )
            )
    return labelled


def test_fit_recovers_known_constants():
    data = rows()
    params = [
        Parameter("a100-40gb.eta_max", 0.45, 0.05, 1.0),
        Parameter("a100-40gb.work_half_gflop", 50.0, 0.1, 5000.0),
        Parameter("a40.eta_max", 0.45, 0.05, 1.0),
        Parameter("a40.work_half_gflop", 50.0, 0.1, 5000.0),
        Parameter("family.moe", 1.0, 0.2, 3.0),
    ]
    base = Calibration(
        **{
            **prior_calibration("alpa").__dict__,
            "intra_link_efficiency": 0.3,
            "gpus": {
                "a100-40gb": GPUCalibration(0.45, 50.0, 0.5),
                "a40": GPUCalibration(0.45, 50.0, 0.1),
            },
        }
    )
    res = fit_calibration(get_framework("alpa"), base, data, params)
    cal = res.calibration
    assert res.train_mape < 0.01
    assert cal.gpu("a100-40gb").eta_max == pytest.approx(0.55, rel=0.03)
    assert cal.gpu("a40").eta_max == pytest.approx(0.40, rel=0.03)
    assert cal.family("moe") == pytest.approx(0.8, rel=0.03)


def test_a_partial_refit_fits_the_named_constants_and_keeps_the_rest():
    """refit_parameters: start from the base's values; the others stay the base's."""
    data = rows()
    # The truth with a wrong A40 η_max: the refit recovers it, the rest is left as it was.
    base = Calibration(
        **{**TRUTH.__dict__, "gpus": {**TRUTH.gpus, "a40": GPUCalibration(0.6, 600.0, 0.1)}}
    )
    params = refit_parameters("alpa", data, base, ["a40.eta_max"])
    assert [(p.name, p.initial) for p in params] == [("a40.eta_max", 0.6)]
    res = fit_calibration(get_framework("alpa"), base, data, params)
    assert res.parameters == ("a40.eta_max",)
    assert res.calibration.gpu("a40").eta_max == pytest.approx(0.40, rel=0.03)
    assert res.calibration.gpu("a100-40gb") == TRUTH.gpu("a100-40gb")
    assert res.calibration.family("moe") == TRUTH.family("moe")
    assert current_value(res.calibration, "intra_link_efficiency") == 0.3
    with pytest.raises(ConfigError, match=r"not free constants here: h100\.eta_max"):
        refit_parameters("alpa", data, base, ["h100.eta_max"])
