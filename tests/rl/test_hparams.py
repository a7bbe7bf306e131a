"""The resolved hyperparameters go to TensorBoard's HPARAMS tab as flat scalars (issue 13)."""

from crius_gym.rl.callbacks import HParamsCallback
from crius_gym.rl.ppo import resolve_hyperparams


def test_hyperparameters_flatten_to_scalars():
    flat = HParamsCallback.flatten(resolve_hyperparams("tiny").as_dict())
    assert flat["n_envs"] == 2 and flat["env.episode_jobs"] == 12
    assert flat["policy_kwargs.hidden"] == 64
    assert all(isinstance(v, bool | int | float | str) for v in flat.values())
    assert isinstance(flat["deploy_margins"], str)  # lists as text
