from __future__ import annotations

import pytest

from crius_gym.hardware.cluster import build_cluster
from crius_gym.perf.calibration import Calibration, GPUCalibration, get_calibration
from crius_gym.perf.estimator import Estimator
from crius_gym.perf.framework import get_framework


@pytest.fixture(scope="session")
def alpa() -> Estimator:
    return Estimator(get_framework("alpa"), get_calibration("alpa"))


@pytest.fixture(scope="session")
def megatron() -> Estimator:
    return Estimator(get_framework("megatron"), get_calibration("megatron"))


@pytest.fixture(scope="session")
def linear_alpa() -> Estimator:
    """Alpa profile with a flat efficiency curve and no memory-traffic term (exact algebra)."""
    cal = Calibration(
        framework="alpa",
        gpus={},
        default_gpu=GPUCalibration(eta_max=0.5, work_half_gflop=0.0, inter_node_efficiency=0.5),
        intra_link_efficiency=0.5,
    )
    return Estimator(get_framework("alpa"), cal)


@pytest.fixture
def four_type_cluster():
    return build_cluster(
        [
            {"gpu": "a100", "nodes": 4, "gpus_per_node": 4},
            {"gpu": "v100", "nodes": 1, "gpus_per_node": 16},
            {"gpu": "a40", "nodes": 8, "gpus_per_node": 2},
            {"gpu": "a10", "nodes": 8, "gpus_per_node": 2},
        ]
    )
