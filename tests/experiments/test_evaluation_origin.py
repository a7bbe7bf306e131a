"""The evaluation report says how each saved policy was made (PPO, DAgger, soup)."""

from crius_gym.scripts.evaluation import _origin, _own_tensorboard

PPO = {
    "scenario": "mix",
    "timesteps": 301056,
    "policy": "rowwise",
    "warm_start": True,
    "tensorboard": "results/runs/d-s0",
}


def test_ppo_policy_is_described_by_its_training_and_keeps_its_curve():
    assert _origin(PPO) == "trained on mix for 301056 timesteps (rowwise network, warm start yes)"
    assert _own_tensorboard(PPO) == "results/runs/d-s0"


def test_distilled_network_is_not_credited_with_its_inits_ppo_training():
    meta = {
        **PPO,
        "distilled": {
            "init": "results/reference_policy/best_model.zip",
            "round": 2,
            "labels": 21225,
        },
    }
    text = _origin(meta)
    assert "DAgger (round 2, 21225 pooled labels" in text and "timesteps" not in text
    assert _own_tensorboard(meta) is None  # the init's PPO curve is not how it was made


def test_soup_names_its_members():
    meta = {**PPO, "soup": {"members": ["a/best_model.zip", "b/best_model.zip"]}}
    assert "soup) of 2 networks (`a/best_model.zip`, `b/best_model.zip`)" in _origin(meta)
    assert _own_tensorboard(meta) is None
