"""The vine's replay of labelled decisions: a ring of preallocated arrays."""

import numpy as np
import pytest

from crius_gym.rl.replay import LabelReplay


def _obs(v: float) -> dict[str, np.ndarray]:
    return {"jobs": np.full(3, v, dtype=np.float32), "globals": np.array([v], dtype=np.float32)}


def test_replay_keeps_the_newest_and_returns_what_was_stored():
    replay = LabelReplay(3)
    assert len(replay) == 0 and replay.share_not_guide() == 0.0
    for i in range(5):  # 0 and 1 are overwritten by 3 and 4
        replay.append(_obs(i), np.array([True, i % 2 == 0]), label=i, not_guide=i >= 3)
    assert len(replay) == 3
    obs, masks, labels = replay.batch(np.arange(3))
    assert sorted(labels.tolist()) == [2, 3, 4]
    for row, label in enumerate(labels):
        assert obs["jobs"][row].tolist() == [label] * 3
        assert obs["globals"][row, 0] == label
        assert masks[row].tolist() == [True, label % 2 == 0]
    assert replay.share_not_guide() == pytest.approx(2 / 3)


def test_replay_copies_its_inputs():
    replay = LabelReplay(2)
    o, m = _obs(1.0), np.array([True, False])
    replay.append(o, m, label=0, not_guide=False)
    o["jobs"][:] = 9.0
    m[:] = True
    obs, masks, _ = replay.batch(np.array([0]))
    assert obs["jobs"][0].tolist() == [1.0] * 3 and masks[0].tolist() == [True, False]


def test_replay_refuses_no_capacity():
    with pytest.raises(ValueError, match="capacity"):
        LabelReplay(0)
