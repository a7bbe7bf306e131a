"""The rollout-throughput measurement of benchmark.py's rollouts section (a smoke test of its
accounting, not a measurement)."""

import pytest

from crius_gym.env.config import EnvConfig
from crius_gym.rl.rollout_bench import rollout_throughput


@pytest.mark.parametrize("workers", [0, 1])
def test_every_decision_is_labelled_and_timed(workers):
    out = rollout_throughput("tiny", EnvConfig(episode_jobs=10), "process", workers, 12)
    assert out["seconds"] > 0
    assert out["labels_per_s"] == pytest.approx(12 / out["seconds"])
    # The guide's action at least, usually WAIT and other Cells too.
    assert out["rollouts_per_s"] >= out["labels_per_s"]
    assert out["ms_per_label"] == pytest.approx(1000 * out["seconds"] / 12)
