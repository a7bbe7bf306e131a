from __future__ import annotations

import pytest

from crius_gym.hardware.cluster import build_cluster
from crius_gym.perf.calibration import get_calibration
from crius_gym.perf.estimator import Estimator
from crius_gym.perf.framework import get_framework
from crius_gym.perf.tuner import Tuner
from crius_gym.sim.simulator import SimConfig, Simulator
from crius_gym.workload.job import Job, Trace
from crius_gym.workload.models import load_model_catalog

MODELS = load_model_catalog()


def make_sim(groups, restore_s=0.0):
    cluster = build_cluster(groups)
    tuner = Tuner(cluster, Estimator(get_framework("alpa"), get_calibration("alpa")))
    return Simulator(cluster, tuner, config=SimConfig(checkpoint_restore_s=restore_s))


def job(i, t, model="bert-760m", batch=128, iters=100, gpus=None, gpu_type=None):
    return Job(f"j{i}", t, MODELS.get(model), batch, iters, gpus, gpu_type)


def trace(*jobs):
    return Trace("test", tuple(jobs))


@pytest.fixture
def small_sim():
    return make_sim(
        [
            {"gpu": "a100", "nodes": 2, "gpus_per_node": 4},
            {"gpu": "a40", "nodes": 4, "gpus_per_node": 2},
        ],
        restore_s=30.0,
    )
