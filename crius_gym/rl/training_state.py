"""A training run's whole state at a rollout-phase boundary, for an exact resume.

A checkpoint's ``model_<steps>.zip`` holds the network, its PPO optimizer and SB3's counters,
which is what a policy needs but not what the next update depends on. A run resumed from the
zip alone draws other episodes, other vine decisions and other minibatches than the run that
was killed, and ends with other weights. :func:`capture` takes the rest, at the start of a
rollout phase (the only moment nothing is half-done: the update of the last phase is complete
and the next has not started):

* the training envs (the ``DummyVecEnv``'s envs with their episodes in progress, pickled
  together so that the tuners they share stay shared, and its step buffers);
* the vine's current observations, the labelled decisions of the replay, and the rollouts of
  the last phase's evaluated decisions, which the next update uses (waited for: a future
  cannot be saved; the wait changes no number, the update would wait for them anyway);
* the distillation optimizer; the model's own generator; the global torch, numpy and Python
  generators (SB3 samples actions from torch's and shuffles minibatches with numpy's);
* SB3's last observations and episode starts, and its episode statistics.

:func:`save_state` writes it next to the zip (``state_<steps>.pkl.z``, zlib level 1 of a
pickle: the replay's observations are mostly zeros, 230 MB raw for 20,000 decisions of the
default mixture, about a tenth compressed) atomically; :func:`load_state` reads it back,
refusing a file that is truncated, corrupt or of another format with the file named.
:meth:`~crius_gym.rl.sequence_ppo.SequencePPO.restore_training_state` puts it back in place of
the freshly reset envs when the resumed run starts learning, so the resumed run continues with
exactly the numbers the killed run would have computed.

The file is a pickle of this package's own objects: like the zip (which SB3 also unpickles), it
is to be read only from run folders one trusts.
"""

from __future__ import annotations

import pickle
import random
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.vec_env import DummyVecEnv

from crius_gym.atomic import atomic_path
from crius_gym.errors import RunStateError

FORMAT = 1
SUFFIX = ".pkl.z"
_VENV_FIELDS = ("envs", "buf_obs", "buf_dones", "buf_rews", "buf_infos", "reset_infos")


def state_path(checkpoint: Path) -> Path:
    """The state file beside ``checkpoints/model_<steps>.zip``: ``state_<steps>.pkl.z``."""
    steps = checkpoint.stem.split("_", 1)[1]
    return checkpoint.with_name(f"state_{steps}{SUFFIX}")


def supports_exact_resume(model: Any) -> bool:
    """Whether ``model``'s training state can be captured (its envs live in this process)."""
    return hasattr(model, "restore_training_state") and isinstance(model.get_env(), DummyVecEnv)


def _resolved(pending: list[Any]) -> list[Any]:
    """The last phase's evaluated decisions with their rollout costs waited for."""
    out = []
    for item in pending:
        costs = item[7]
        out.append([*item[:7], list(costs.result()) if hasattr(costs, "result") else costs])
    return out


def capture(model: Any) -> dict[str, Any]:
    """Everything the rest of the run depends on besides the zip (see the module docstring).

    Call at the start of a rollout phase (``on_rollout_start``), after the vine has set up its
    episodes.
    """
    venv = model.get_env()
    assert isinstance(venv, DummyVecEnv)
    optimizer = model._distill_optimizer
    return {
        "format": FORMAT,
        "num_timesteps": int(model.num_timesteps),
        "venv": {k: getattr(venv, k) for k in _VENV_FIELDS},
        "vine_obs": model._vine_obs,
        "vine_pending": _resolved(model._vine_pending),
        "replay": model._replay,
        "distill_optimizer": None if optimizer is None else optimizer.state_dict(),
        "sequence_rng": model._sequence_rng.bit_generator.state,
        "torch_rng": torch.get_rng_state(),
        "numpy_rng": np.random.get_state(),  # noqa: NPY002 - SB3 shuffles minibatches with it
        "python_rng": random.getstate(),
        "last_obs": model._last_obs,
        "last_episode_starts": model._last_episode_starts,
        "ep_info_buffer": model.ep_info_buffer,
        "ep_success_buffer": model.ep_success_buffer,
        "episode_num": model._episode_num,
    }


def apply(model: Any, state: dict[str, Any]) -> None:
    """Put a captured state back into ``model`` and its envs (after SB3 set up learning).

    Raises:
        RunStateError: the state was captured at another step than the model's.
    """
    if state["num_timesteps"] != model.num_timesteps:
        raise RunStateError(
            f"training state of step {state['num_timesteps']} does not belong to a model at "
            f"step {model.num_timesteps}"
        )
    venv = model.get_env()
    assert isinstance(venv, DummyVecEnv)
    if len(state["venv"]["envs"]) != venv.num_envs:
        raise RunStateError(
            f"training state has {len(state['venv']['envs'])} envs, the run {venv.num_envs} "
            "(n_envs changed since the checkpoint)"
        )
    for old in venv.envs:
        old.close()
    for key, value in state["venv"].items():
        setattr(venv, key, value)
    model._vine_obs = state["vine_obs"]
    model._vine_pending = state["vine_pending"]
    model._replay = state["replay"]
    if state["distill_optimizer"] is not None:
        model._distill_optimizer = torch.optim.Adam(model.policy.parameters(), lr=model.vine_lr)
        model._distill_optimizer.load_state_dict(state["distill_optimizer"])
    model._sequence_rng.bit_generator.state = state["sequence_rng"]
    torch.set_rng_state(state["torch_rng"])
    np.random.set_state(state["numpy_rng"])  # noqa: NPY002
    random.setstate(state["python_rng"])
    model._last_obs = state["last_obs"]
    model._last_episode_starts = state["last_episode_starts"]
    model.ep_info_buffer = state["ep_info_buffer"]
    model.ep_success_buffer = state["ep_success_buffer"]
    model._episode_num = state["episode_num"]


def save_state(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically (a killed write leaves the old file or none)."""
    blob = zlib.compress(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL), 1)
    with atomic_path(path) as tmp:
        tmp.write_bytes(blob)


def load_state(path: Path) -> dict[str, Any]:
    """Read a state written by :func:`save_state`.

    Raises:
        RunStateError: the file is unreadable, truncated, corrupt or of another format.
    """
    try:
        state = pickle.loads(zlib.decompress(path.read_bytes()))
    except (OSError, zlib.error, pickle.UnpicklingError, EOFError, AttributeError) as exc:
        raise RunStateError(f"{path}: not a readable training state ({exc})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise RunStateError(f"{path}: training state of another format (expected {FORMAT})")
    return state
