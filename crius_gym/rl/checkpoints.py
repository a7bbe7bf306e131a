"""Checkpoints of a training run, and the one a resume continues from.

Every ``freq`` timesteps, at the start of the next rollout phase, a run saves
``checkpoints/model_<steps>.zip`` and, when the model's training state can be captured
(:mod:`crius_gym.rl.training_state`), ``checkpoints/state_<steps>.pkl.z`` beside it: the pair is
an *exact* checkpoint, from which ``--resume`` continues with the numbers the run would have
computed. The first phase of a new run saves one at step 0, so a run killed at any moment after
its warm start resumes exactly. Ctrl-C saves the weights at once (``model_<steps>.zip`` alone,
mid-phase); a resume still prefers the newest exact checkpoint and says what it redoes.

Each file is written atomically, the zip before its state, so a run killed while it writes
leaves the older pair complete. The newest exact pairs are kept (``keep_checkpoints``, 2 by
default), with any weights-only checkpoint newer than them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stable_baselines3.common.callbacks import BaseCallback

from crius_gym.atomic import atomic_path
from crius_gym.rl import training_state


def checkpoint_timesteps(path: Path) -> int:
    """The timesteps a checkpoint file ``model_<timesteps>.zip`` was saved at."""
    return int(path.stem.split("_")[1])


def _zips(save_dir: Path) -> list[Path]:
    return sorted((save_dir / "checkpoints").glob("model_*.zip"), key=checkpoint_timesteps)


def latest_checkpoint(save_dir: Path) -> Path | None:
    """The newest checkpoint of a run (exact or weights only), if any."""
    ckpts = _zips(save_dir)
    return ckpts[-1] if ckpts else None


@dataclass(frozen=True)
class ResumePoint:
    """Where a resume continues: a checkpoint zip and, if it is exact, its training state."""

    model: Path
    state: Path | None

    @property
    def timesteps(self) -> int:
        """The step the checkpoint was saved at."""
        return checkpoint_timesteps(self.model)


def latest_exact(save_dir: Path) -> ResumePoint | None:
    """The newest checkpoint with its training state, if any."""
    for path in reversed(_zips(save_dir)):
        state = training_state.state_path(path)
        if state.is_file():
            return ResumePoint(path, state)
    return None


class CheckpointCallback(BaseCallback):
    """Saves a checkpoint at the first phase start at or after every ``freq`` timesteps.

    Args:
        freq: timesteps between checkpoints.
        save_dir: the run's folder (files go to its ``checkpoints/``).
        keep: exact checkpoints kept, the newest (0: all).
    """

    def __init__(self, freq: int, save_dir: Path, keep: int = 2) -> None:
        super().__init__()
        self.freq = freq
        self.keep = keep
        self.dir = save_dir / "checkpoints"
        self._next = freq
        self._first = True

    def _init_callback(self) -> None:
        self._next = (self.model.num_timesteps // self.freq + 1) * self.freq
        self._first = True

    def save_now(self) -> Path:
        """Save the weights at the current step (no training state: mid-phase), then prune."""
        path = self._save_zip()
        self._prune()
        return path

    def _save_zip(self) -> Path:
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / f"model_{self.model.num_timesteps}.zip"
        with atomic_path(path) as tmp:
            self.model.save(tmp)
        return path

    def _save_exact(self) -> Path:
        path = self._save_zip()
        if training_state.supports_exact_resume(self.model):
            state = self.model.capture_training_state()  # type: ignore[attr-defined]
            training_state.save_state(training_state.state_path(path), state)
        self._prune()
        return path

    def _prune(self) -> None:
        zips = _zips(self.dir.parent)
        exact = [z for z in zips if training_state.state_path(z).is_file()]
        keep = set(exact[-self.keep :] if self.keep else zips)
        newest_exact = checkpoint_timesteps(exact[-1]) if exact else -1
        keep |= {z for z in zips if checkpoint_timesteps(z) > newest_exact}
        if not exact and self.keep:  # nothing exact (e.g. SubprocVecEnv envs): newest weights
            keep = set(zips[-self.keep :])
        for z in zips:
            if z not in keep:
                z.unlink()
                training_state.state_path(z).unlink(missing_ok=True)
        for orphan in self.dir.glob(f"state_*{training_state.SUFFIX}"):
            steps = orphan.name[len("state_") : -len(training_state.SUFFIX)]
            if not (self.dir / f"model_{steps}.zip").exists():
                orphan.unlink()

    def _on_rollout_start(self) -> None:
        self.num_timesteps = self.model.num_timesteps  # SB3 syncs it in on_step only
        # A new run's first phase: step 0, so that a kill at any later moment resumes exactly.
        fresh = self._first and self.num_timesteps == 0
        self._first = False
        if fresh or self.num_timesteps >= self._next:
            while self._next <= self.num_timesteps:
                self._next += self.freq
            self._save_exact()

    def _on_step(self) -> bool:
        return True
