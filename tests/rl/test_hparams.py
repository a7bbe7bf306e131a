"""The resolved hyperparameters go to TensorBoard's HPARAMS tab as flat scalars (issue 13)."""

from crius_gym.rl.callbacks import HParamsCallback
from crius_gym.rl.ppo import resolve_hyperparams


def test_hyperparameters_flatten_to_scalars():
    flat = HParamsCallback.flatten(resolve_hyperparams("tiny").as_dict())
    assert flat["n_envs"] == 2 and flat["env.episode_jobs"] == 12
    assert flat["policy_kwargs.hidden"] == 64
    assert all(isinstance(v, bool | int | float | str) for v in flat.values())
    assert isinstance(flat["deploy_margins"], str)  # lists as text


def test_label_and_advantage_options_are_validated():
    import pytest

    from crius_gym.errors import ConfigError
    from crius_gym.rl.ppo import PPOHyperparams

    for bad in (-0.1, 1.0, float("nan")):
        with pytest.raises(ConfigError, match="vine_rel_margin"):
            PPOHyperparams(vine_rel_margin=bad)
    with pytest.raises(ConfigError, match="vine_adv_norm"):
        PPOHyperparams(vine_adv_norm="state")  # type: ignore[arg-type]
    assert PPOHyperparams(vine_rel_margin=0.001, vine_adv_norm="decision").vine_rel_margin == 0.001
