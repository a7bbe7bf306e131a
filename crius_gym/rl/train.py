"""The training function shared by ``experiments/train_ppo.py`` and the Ray Tune sweep.

One call trains one run: environments, model (fresh, warm-started, or resumed from the run's
latest checkpoint), validation against Crius, checkpoints, and the saved policy with its
metadata. ``on_eval`` receives every validation result, which is how a sweep reports to Ray
Tune without a second training loop.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import pandas as pd
import yaml
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv
from tqdm import tqdm

from crius_gym.atomic import atomic_path, atomic_write_text
from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.errors import ConfigError, InputFileError, RunStateError
from crius_gym.perf.tuner import Tuner
from crius_gym.policies.registry import make_policy
from crius_gym.rl import training_state
from crius_gym.rl.callbacks import (
    EPISODE_KEYS,
    HParamsCallback,
    ProgressCallback,
    SchedMetricsCallback,
    ValidationCallback,
    ValidationSet,
)
from crius_gym.rl.checkpoints import (
    CheckpointCallback,
    ResumePoint,
    checkpoint_timesteps,
    latest_checkpoint,
    latest_exact,
)
from crius_gym.rl.deviation import measure_envelope, select_guide_margin, selection_scenarios
from crius_gym.rl.imitation import (
    agreement,
    behaviour_clone,
    collect_demonstrations,
    pretrain_critic,
)
from crius_gym.rl.ppo import PPOHyperparams, make_model
from crius_gym.rl.saved import PolicyCompatibilityError, read_metadata, write_metadata
from crius_gym.rl.sequence_ppo import SequencePPO
from crius_gym.scenarios import Scenario, load_scenario
from crius_gym.yamlfile import load_yaml_file

EvalHook = Callable[[dict[str, float], Path], None]


@dataclass(frozen=True)
class TrainSpec:
    """One training run.

    Attributes:
        run: run name.
        scenario: scenario name.
        hyperparams: resolved hyperparameters.
        seed: seed of PPO, the envs and the warm start.
        policy_dir: where the policy, checkpoints and metadata go.
        runs_dir: where TensorBoard logs go.
        provenance: command, date, version and git revision (saved with the policy).
        progress: show a progress bar.
    """

    run: str
    scenario: str
    hyperparams: PPOHyperparams
    seed: int
    policy_dir: Path
    runs_dir: Path
    provenance: dict[str, str]
    progress: bool = True

    def save_config(self) -> None:
        """Write ``config.yaml`` (what ``--resume`` reads back).

        A resumed run keeps the command that started it; each resume is appended to
        ``resumed_by`` with the ``total_timesteps`` it trained to. The file's own
        ``total_timesteps`` is the run's target and never shrinks: a session told to stop
        earlier leaves the rest for the next resume.
        """
        self.policy_dir.mkdir(parents=True, exist_ok=True)
        path = self.policy_dir / "config.yaml"
        old = _read_yaml(path) if path.is_file() else {}
        command = self.provenance.get("command", "")
        hp = self.hyperparams.as_dict()
        if old:
            target = int((old.get("hyperparams") or {}).get("total_timesteps") or 0)
            hp["total_timesteps"] = max(target, self.hyperparams.total_timesteps)
        body: dict[str, Any] = {
            "scenario": self.scenario,
            "seed": self.seed,
            "hyperparams": hp,
            "command": old.get("command", command),
        }
        resumes = list(old.get("resumed_by") or [])
        if old:
            resumes.append(
                {
                    "command": command,
                    "date": self.provenance.get("date", ""),
                    "total_timesteps": self.hyperparams.total_timesteps,
                }
            )
        if resumes:
            body["resumed_by"] = resumes
        atomic_write_text(path, yaml.safe_dump(body, sort_keys=False))

    @classmethod
    def from_saved(
        cls,
        policy_dir: Path,
        runs_dir: Path,
        provenance: dict[str, str],
        total_timesteps: int | None = None,
        progress: bool = True,
    ) -> TrainSpec:
        """The spec of an existing run (for ``--resume``)."""
        path = policy_dir / "config.yaml"
        saved = _read_yaml(path)
        if not isinstance(saved.get("hyperparams"), dict) or "scenario" not in saved:
            raise InputFileError(path, "not a run config (no scenario or hyperparams)")
        hp = dict(saved["hyperparams"])
        if total_timesteps:
            hp["total_timesteps"] = total_timesteps
        return cls(
            run=policy_dir.name,
            scenario=saved["scenario"],
            hyperparams=PPOHyperparams(**hp),
            seed=int(saved["seed"]),
            policy_dir=policy_dir,
            runs_dir=runs_dir,
            provenance=provenance,
            progress=progress,
        )


@dataclass(frozen=True)
class TrainOutcome:
    """What a run produced.

    Attributes:
        model_path: the final model.
        best_path: the best model by validation (may not exist if no validation ran).
        timesteps: timesteps trained in total.
        interrupted: stopped by Ctrl-C (a checkpoint was saved).
        best_validation: (unfinished jobs, average JCT) of the best model.
        seconds: wall time of this call's training.
        margin_interrupted: training finished, but Ctrl-C stopped the guide-margin selection
            (the policy is saved without a recorded margin).
    """

    model_path: Path
    best_path: Path
    timesteps: int
    interrupted: bool
    best_validation: tuple[float, float]
    seconds: float
    margin_interrupted: bool = False


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = load_yaml_file(path)
    except InputFileError as exc:
        raise InputFileError(
            path, f"not readable YAML ({exc.message})", row=exc.row, field=exc.field
        ) from exc
    if not isinstance(data, dict):
        raise InputFileError(path, "expected a mapping")
    return data


def _resume_point(spec: TrainSpec, log: Callable[[str], None]) -> ResumePoint:
    """The checkpoint a resume continues from.

    The newest exact checkpoint (weights and training state: the resumed run computes what the
    uninterrupted one would have), else the newest weights-only one (a run of an older version
    or with subprocess envs), or the final model of a run that finished (a longer
    ``total_timesteps`` extends it).

    Raises:
        RunStateError: nothing to resume (the run stopped before its first checkpoint), or the
            run already reached its total.
    """
    latest = latest_checkpoint(spec.policy_dir)
    exact = latest_exact(spec.policy_dir)
    point = exact or (ResumePoint(latest, None) if latest is not None else None)
    meta_path = spec.policy_dir / "metadata.yaml"
    meta = _read_yaml(meta_path) if meta_path.is_file() else {}
    final = spec.policy_dir / "model.zip"
    done = int(meta.get("timesteps") or 0)
    finished = not meta.get("in_progress", True) and final.is_file()
    if finished and done >= (point.timesteps if point is not None else -1):
        point = None
        if done >= spec.hyperparams.total_timesteps:
            raise RunStateError(
                f"{spec.policy_dir}: the run finished at {done} timesteps; pass a larger "
                "--total-timesteps to train it further"
            )
        return ResumePoint(final, None)
    if point is None:
        raise RunStateError(
            f"{spec.policy_dir}: nothing to resume - the run has no checkpoint (it stopped "
            f"before its first one, every {spec.hyperparams.checkpoint_freq} timesteps); "
            "start a new run with another --run-name, or delete this folder"
        )
    if point.timesteps >= spec.hyperparams.total_timesteps:
        raise RunStateError(
            f"{spec.policy_dir}: already trained {point.timesteps} timesteps >= "
            f"--total-timesteps {spec.hyperparams.total_timesteps}; nothing to do"
        )
    if point.state is None:
        log(
            f"{point.model} has no training state (weights only): the resumed run starts new "
            "episodes and will not match an uninterrupted one exactly"
        )
    elif latest is not None and checkpoint_timesteps(latest) > point.timesteps:
        log(
            f"the newest checkpoint ({latest.name}, saved on an interrupt) holds weights only; "
            f"resuming exactly from step {point.timesteps} redoes "
            f"{checkpoint_timesteps(latest) - point.timesteps} timesteps"
        )
    return point


def _truncate_evaluations(policy_dir: Path, timesteps: int) -> None:
    """Drop validation rows past an exact resume's step: the resumed run records them again."""
    path = policy_dir / "evaluations.csv"
    if not path.is_file():
        return
    rows = pd.read_csv(path)
    if "timesteps" in rows and (rows["timesteps"] > timesteps).any():
        with atomic_path(path) as tmp:
            rows[rows["timesteps"] <= timesteps].to_csv(tmp, index=False)


def _refuse_existing(policy_dir: Path) -> None:
    """A new run never overwrites another one's folder."""
    if (policy_dir / "config.yaml").exists() or (policy_dir / "model.zip").exists():
        raise RunStateError(
            f"{policy_dir}: a run of this name exists; continue it with --resume "
            f"{policy_dir.name}, or choose another --run-name"
        )


def _make_env_fn(
    scenario: str, env_cfg: EnvConfig, subprocess: bool = False, shared: list[Tuner] | None = None
) -> Callable[[], gym.Env[Any, Any]]:
    """A factory of one training env; envs made in one process share ``shared``'s tuners.

    ``shared`` starts empty and takes the first env's tuners (one per mixture component), so
    each (model, batch) is tuned once per process instead of once per env.
    """

    def _make() -> gym.Env[Any, Any]:
        if subprocess:  # in the worker: Ctrl-C to the process group is the trainer's to handle
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        env = CriusEnv(scenario, env_cfg, tuners=shared or None)
        if shared is not None and not shared:
            shared.extend(env.tuners)
        return Monitor(env, info_keywords=EPISODE_KEYS)

    return _make


def _close_after_interrupt(venv: VecEnv) -> None:
    """Close the training envs after an interrupt without waiting on them.

    An interrupt can land while ``SubprocVecEnv`` waits for its workers' step results, and its
    ``close()`` would then wait again for results already received (forever); the workers may
    also be gone (Ctrl-C reaches the whole process group). The model is what matters, so the
    workers are stopped outright.
    """
    if isinstance(venv, SubprocVecEnv):
        for process in venv.processes:
            process.terminate()
        for process in venv.processes:
            process.join(timeout=10)
        venv.closed = True
        return
    with contextlib.suppress(EOFError, BrokenPipeError, ConnectionResetError):
        venv.close()


def build_vec_env(hp: PPOHyperparams, scenario: str, env_cfg: EnvConfig, seed: int) -> VecEnv:
    """The training VecEnv (Monitor-wrapped envs, ``DummyVecEnv`` or ``SubprocVecEnv``)."""
    sub = hp.vec_env == "subproc"
    shared: list[Tuner] = []  # filled by the first env (each subprocess has its own copy)
    fns = [_make_env_fn(scenario, env_cfg, sub, shared) for _ in range(hp.n_envs)]
    venv: VecEnv = SubprocVecEnv(fns) if hp.vec_env == "subproc" else DummyVecEnv(fns)
    venv.seed(seed)
    return venv


class _EvalReporter(ValidationCallback):
    """Validation that prints every result as it comes and hands it to a hook (Ray Tune)."""

    def __init__(
        self, hook: EvalHook | None, *args: Any, log: Callable[[str], None] | None = None
    ) -> None:
        super().__init__(*args)
        self.hook = hook
        self.log = log

    def _record(self) -> None:
        before = len(self.rows)
        super()._record()
        if len(self.rows) == before:
            return
        row = self.rows[-1]
        if self.log is not None:
            # tqdm.write keeps the progress bar intact below the line.
            tqdm.write(
                f"validation at {int(row['timesteps'])} steps: JCT {row['eval_jct_ratio']:.4f}"
                f" ± {row['eval_jct_ratio_ci95']:.4f} x Crius, throughput "
                f"{row['eval_throughput_ratio']:.4f} x, unfinished {int(row['eval_unfinished'])}"
                f" (best so far {self.best[1]:.4f} x)"
                + "".join(
                    f"; {k[len('eval_jct_ratio[') : -1]} {v:.3f}"
                    for k, v in row.items()
                    if k.startswith("eval_jct_ratio[")
                )
            )
        if self.hook is not None:
            self.hook(dict(row), self.save_dir)


def validation_sets(
    scenario: Scenario, hp: PPOHyperparams, env_cfg: EnvConfig, seed: int
) -> list[ValidationSet]:
    """The validation traces of each validation scenario with the reference's runs on them.

    Scenarios: ``eval_scenarios`` (default: the training scenario); each contributes its first
    ``eval_traces`` validation traces, at most as many as its ``splits.validation_traces`` (a
    scenario of 1,000-job traces declares 2). The reference is the env's guide (else Crius),
    run on the simulator with the same seed. Validation runs whole traces: no decision cap (it
    guards training episodes only).
    """
    names = hp.eval_scenarios or (scenario.path or scenario.name,)
    reference = env_cfg.guide or "crius"
    sets = []
    for name in names:
        sc = scenario if name in (scenario.name, scenario.path) else load_scenario(name)
        env = CriusEnv(sc, dataclasses.replace(env_cfg, max_decisions=10**12))
        count = min(hp.eval_traces, sc.splits.validation_traces)
        traces = tuple(sc.synthetic_trace("val", i, tuner=env.tuner) for i in range(count))
        sim = sc.make_simulator(env.tuner)
        refs = tuple(sim.run(t, make_policy(reference, scenario=sc), seed=seed) for t in traces)
        sets.append(ValidationSet(env, traces, refs, sc.name))
    return sets


def init_weights(model: SequencePPO, path: Path) -> None:
    """Load a saved policy's network weights into ``model`` (same network and spaces).

    Raises:
        ConfigError: the file is missing, or its network is not this one.
    """
    if not path.is_file():
        raise ConfigError(f"init_policy: {path} not found")
    saved = SequencePPO.load(path, device="cpu")
    try:
        model.policy.load_state_dict(saved.policy.state_dict())
    except RuntimeError as err:
        raise ConfigError(f"init_policy: {path} is another network: {err}") from None


def warm_start(
    model: SequencePPO,
    hp: PPOHyperparams,
    env: CriusEnv,
    held_out: ValidationSet,
    seed: int,
    log: Callable[[str], None],
) -> dict[str, float]:
    """Behaviour cloning of Crius (``bc_epochs``), then critic pre-training (``critic_*``).

    Agreement with Crius is measured on the decisions of the first validation scenario's
    traces, which cloning never sees.
    """
    t0 = time.perf_counter()
    out: dict[str, float] = {}
    # Each phase says what it does before it starts: none is silent for long.
    if hp.bc_epochs and hp.bc_episodes:
        log(f"warm start: {hp.bc_episodes} Crius episodes to clone, {hp.bc_epochs} epochs ...")
        demos = collect_demonstrations(env, "crius", hp.bc_episodes, hp.gamma, seed)
        out.update(
            behaviour_clone(model, demos, hp.bc_epochs, hp.batch_size, seed, hp.bc_learning_rate)
        )
        out.update(demonstrations=len(demos), unlabelled=demos.skipped)
    log(f"warm start: agreement with Crius on {len(held_out.traces)} validation traces ...")
    held = collect_demonstrations(held_out.env, "crius", 0, hp.gamma, seed, held_out.traces)
    out["held_out_agreement"] = agreement(model, held)
    out["held_out_decisions"] = float(len(held))
    if hp.critic_episodes:
        log(f"warm start: critic pre-training on {hp.critic_episodes} episodes ...")
        out.update(
            pretrain_critic(model, env, hp.critic_episodes, hp.critic_epochs, hp.gamma, seed)
        )
    out["seconds"] = time.perf_counter() - t0
    log(
        f"warm start: agreement with Crius {out['held_out_agreement']:.3f} on "
        f"{len(held)} held-out decisions"
        + (f", cloning accuracy {out['bc_accuracy']:.2f}" if "bc_accuracy" in out else "")
        + (
            f", critic loss {out['critic_loss_before']:.3g} -> {out['critic_loss_after']:.3g}"
            if "critic_loss_after" in out
            else ""
        )
        + f" ({out['seconds']:.0f} s)"
    )
    return out


def _select_deployment(
    spec: TrainSpec,
    scenario: Scenario,
    env_cfg: EnvConfig,
    model: SequencePPO,
    log: Callable[[str], None],
) -> dict[str, Any] | None:
    """Choose the saved policy's guide margin on validation (``deploy_margins``; none: skip).

    The policy that is deployed is ``best_model.zip`` (else the final model), so that is the
    one whose margin is selected (:mod:`crius_gym.rl.deviation`).
    """
    hp = spec.hyperparams
    if not hp.deploy_margins or env_cfg.guide is None:
        return None
    best = spec.policy_dir / "best_model.zip"
    chosen = SequencePPO.load(best, device="cpu") if best.is_file() else model
    t0 = time.perf_counter()
    envelope = None
    if hp.deploy_envelope_episodes:
        envelope = measure_envelope(chosen, env_cfg, scenario, hp.deploy_envelope_episodes)
        log(
            f"envelope: at most {envelope.describe()} on {hp.deploy_envelope_episodes} "
            f"training episodes ({time.perf_counter() - t0:.0f} s)"
        )
    log(f"choosing the guide margin among {list(hp.deploy_margins)} on validation traces")
    sel = select_guide_margin(
        chosen,
        env_cfg,
        selection_scenarios(scenario, hp.eval_scenarios),
        hp.deploy_traces,
        hp.deploy_margins,
        score=hp.deploy_score,
        stress_traces=hp.deploy_stress_traces,
        stress_load=hp.deploy_stress_load,
        stress_jobs=hp.deploy_stress_jobs,
        envelope=envelope,
        envelope_episodes=hp.deploy_envelope_episodes,
    )
    log(
        f"guide margin {sel.guide_margin:g}: validation JCT {sel.scores[sel.guide_margin]:.3f}x "
        f"Crius's (margin 0: {sel.scores.get(0.0, float('nan')):.3f}x; "
        f"{time.perf_counter() - t0:.0f} s)"
    )
    return sel.as_metadata(spec.provenance.get("command", ""))


def train(
    spec: TrainSpec,
    resume: bool = False,
    on_eval: EvalHook | None = None,
    log: Callable[[str], None] = print,
    rollout_backend: str = "process",
    ray_address: str | None = None,
) -> TrainOutcome:
    """Train one run (see the module docstring).

    ``rollout_backend``: where the vine's rollouts run, ``process`` (worker processes) or
    ``ray`` (Ray actors, on a private local instance or the cluster at ``ray_address``); the
    run's numbers are the same on both.
    """
    if rollout_backend not in ("process", "ray"):
        raise ConfigError(f"rollout backend must be process or ray, got {rollout_backend!r}")
    if rollout_backend == "ray" and not (spec.hyperparams.rollout_workers > 0):
        raise ConfigError("rollout backend ray needs rollout_workers >= 1 (the actors)")
    hp = spec.hyperparams
    point: ResumePoint | None = None
    if resume:
        point = _resume_point(spec, log)
        ckpt: Path | None = point.model
        earlier = (
            _read_yaml(spec.policy_dir / "metadata.yaml")
            if (spec.policy_dir / "metadata.yaml").is_file()
            else {}
        )
    else:
        _refuse_existing(spec.policy_dir)
        ckpt, earlier = None, {}
    spec.policy_dir.mkdir(parents=True, exist_ok=True)
    spec.runs_dir.mkdir(parents=True, exist_ok=True)
    spec.save_config()
    scenario = load_scenario(spec.scenario)
    env_cfg = EnvConfig(**dict(hp.env))
    venv: VecEnv | None = None
    try:
        # The scenario as given (a name or a file): never swapped for a namesake in envs/.
        venv = build_vec_env(hp, spec.scenario, env_cfg, spec.seed)
        eval_env = CriusEnv(scenario, env_cfg)
        warm: dict[str, float] = {}
        sets = validation_sets(scenario, hp, env_cfg, spec.seed)
        if ckpt is not None:
            model = SequencePPO.load(
                ckpt, env=venv, device="cpu", tensorboard_log=str(spec.runs_dir)
            )
            if point is not None and point.state is not None:
                model.restore_training_state(training_state.load_state(point.state))
                _truncate_evaluations(spec.policy_dir, model.num_timesteps)
                log(
                    f"resuming from {ckpt} at {model.num_timesteps} timesteps, with its "
                    "training state (the run continues exactly as if never stopped)"
                )
            else:
                log(f"resuming from {ckpt} at {model.num_timesteps} timesteps")
            # The warm start happened in the first session: keep its record (unless the run
            # was killed before it wrote any metadata).
            with contextlib.suppress(PolicyCompatibilityError):
                warm = dict(read_metadata(ckpt).get("warm_start") or {})
        else:
            model = make_model(hp, venv, spec.seed, str(spec.runs_dir))
            if hp.init_policy is not None:
                init_weights(model, Path(hp.init_policy))
                log(f"starting from the weights of {hp.init_policy}")
            if hp.warm_start == "crius":
                warm = warm_start(model, hp, eval_env, sets[0], spec.seed, log)
    except KeyboardInterrupt:
        # Before the first training step there is nothing new to save: say so, no traceback.
        if venv is not None:
            with contextlib.suppress(Exception):
                venv.close()
        where = f"resume later with --resume {spec.run}" if ckpt is not None else "start again"
        log(f"\ninterrupted during start-up, before any training step; nothing saved ({where})")
        raise
    model.rollout_backend, model.ray_address = rollout_backend, ray_address
    if rollout_backend == "ray":
        where = ray_address or "a private local instance"
        log(f"vine rollouts on Ray: {hp.rollout_workers} actors on {where}")
    validation = _EvalReporter(on_eval, sets, hp.eval_freq, spec.policy_dir, log=log)
    checkpoints = CheckpointCallback(hp.checkpoint_freq, spec.policy_dir, hp.keep_checkpoints)
    callbacks = [
        HParamsCallback(hp.as_dict()),
        SchedMetricsCallback(),
        validation,
        checkpoints,
        ProgressCallback(hp.total_timesteps, spec.progress),
    ]

    # Written now as well as at the end, so the checkpoints and best model of a run that is
    # killed outright (SIGKILL, a lost node) can still be loaded and checked.
    # A resume keeps the run's first command and date; its sessions are listed, and
    # train_seconds adds up all of them.
    sessions = [*list(earlier.get("sessions") or []), dict(spec.provenance)]
    first: dict[str, Any] = {k: earlier[k] for k in ("command", "date") if k in earlier}
    earlier_seconds = float(earlier.get("train_seconds") or 0.0)
    base_meta: dict[str, Any] = {
        **spec.provenance,
        **first,
        "sessions": sessions,
        "run": spec.run,
        "seed": spec.seed,
        "policy": hp.policy,
        "warm_start": warm,
        "tensorboard": str(spec.runs_dir),
    }
    write_metadata(spec.policy_dir, eval_env, {**base_meta, "in_progress": True})
    if ckpt is None:  # a resume after this point keeps the warm start (no second cloning)
        with atomic_path(spec.policy_dir / "checkpoints" / "model_0.zip") as tmp:
            model.save(tmp)
    t0 = time.perf_counter()
    interrupted = False
    try:
        model.learn(
            max(0, hp.total_timesteps - model.num_timesteps),
            callback=callbacks,
            tb_log_name="ppo",
            reset_num_timesteps=ckpt is None,
        )
    except KeyboardInterrupt:
        interrupted = True
        path = checkpoints.save_now()
        log(f"\ninterrupted: checkpoint saved to {path}")
    seconds = time.perf_counter() - t0
    model.close_pool()
    if interrupted:
        _close_after_interrupt(venv)
    else:
        venv.close()

    model_path = spec.policy_dir / "model.zip"
    with atomic_path(model_path) as tmp:
        model.save(tmp)
    deployment = None
    margin_interrupted = False
    if not interrupted:
        try:
            deployment = _select_deployment(spec, scenario, env_cfg, model, log)
        except KeyboardInterrupt:
            margin_interrupted = True
            # Training is complete and saved; only the margin is missing (select it later).
            log(
                "\ninterrupted during the guide-margin selection: the policy is saved without "
                f"one (experiments/select_guide_margin.py --policy {spec.policy_dir})"
            )
    write_metadata(
        spec.policy_dir,
        eval_env,
        {
            **base_meta,
            "in_progress": False,
            "timesteps": int(model.num_timesteps),
            "interrupted": interrupted,
            "train_seconds": round(earlier_seconds + seconds, 1),
            "best_validation": {"unfinished": validation.best[0], "avg_jct_s": validation.best[1]},
            **({"deployment": deployment} if deployment else {}),
        },
    )
    return TrainOutcome(
        model_path,
        spec.policy_dir / "best_model.zip",
        int(model.num_timesteps),
        interrupted,
        validation.best,
        seconds,
        margin_interrupted,
    )
