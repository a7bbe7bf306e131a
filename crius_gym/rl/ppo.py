"""MaskablePPO set-up: hyperparameters from ``agents/ppo.yaml`` and the model factory."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from stable_baselines3.common.vec_env import VecEnv

from crius_gym.bundled import agents_dir
from crius_gym.errors import ConfigError, InputFileError
from crius_gym.rl.networks import RowScorerPolicy
from crius_gym.rl.sequence_ppo import SequencePPO
from crius_gym.yamlfile import load_yaml, load_yaml_file

DEFAULT_AGENTS_FILE = agents_dir() / "ppo.yaml"
PPO_KEYS = (
    "learning_rate",
    "n_steps",
    "batch_size",
    "n_epochs",
    "gamma",
    "gae_lambda",
    "clip_range",
    "ent_coef",
    "vf_coef",
    "max_grad_norm",
)


@dataclass(frozen=True)
class PPOHyperparams:
    """One resolved hyperparameter block (``agents/ppo.yaml`` holds the defaults, with comments).

    Attributes:
        policy: ``rowwise`` (the shared-weight (job, Cell) scorer of
            :mod:`crius_gym.rl.networks`) or ``mlp`` (SB3's ``MultiInputPolicy``).
        policy_kwargs: the network's options; for ``rowwise``: ``hidden`` width,
            ``hint_weight`` (the guide's proposal in the logits, a learnable scalar; 0 = none),
            ``zero_init`` (scorers start at 0, so the untrained policy is the guide),
            ``guide_inputs`` (the scorers see the guide's columns; false: the guide enters
            the logits through the hint only).
        total_timesteps: env decisions to train for.
        n_envs: training envs.
        vec_env: ``dummy`` (one process) or ``subproc`` (GAE mode only).
        learning_rate: Adam rate, or ``lin_<rate>`` for a linear decay to 0.
        n_steps: decisions per env per rollout phase (GAE and vine modes; the per-sequence
            baseline runs whole episodes).
        batch_size: minibatch size of the update, decisions.
        n_epochs: passes over a rollout per update.
        gamma: discount per decision.
        gae_lambda: GAE's lambda (GAE mode).
        clip_range: PPO's clipping of the probability ratio.
        ent_coef: entropy bonus coefficient.
        vf_coef: value-loss coefficient.
        max_grad_norm: gradient-norm clip.
        target_kl: stop an update's epochs once the approximate KL exceeds it (None: never).
        warm_start: ``crius`` (behaviour cloning and critic pre-training below) or ``none``.
        bc_episodes: expert (Crius) episodes recorded for behaviour cloning.
        bc_epochs: epochs of behaviour cloning (0: none).
        bc_learning_rate: Adam rate of behaviour cloning (its own optimizer).
        critic_episodes: rollouts of the initial policy whose returns pre-train the critic.
        critic_epochs: epochs of that pre-training.
        sequences: job sequences per update for the per-sequence (Decima) baseline; ``n_envs``
            rollouts of ``n_envs / sequences`` each (0: none).
        update_threads: torch threads of the update.
        vine_fraction: share of decisions whose actions are valued by guide rollouts on a copy
            of the episode (0: no vine; then ``sequences`` or GAE).
        vine_actions: random valid actions valued at such a decision besides the action taken,
            the guide's, WAIT and the guide's job on its other Cells.
        vine_distill_epochs: epochs of cross-entropy on the replay of labelled decisions after
            each update (0: PPO on the vine samples only), at most ``vine_distill_batches``
            minibatches of ``batch_size`` per update.
        vine_distill_batches: the most distillation minibatches per update (caps its cost
            once the replay is large).
        vine_replay: labelled decisions kept for that distillation (oldest dropped).
        vine_margin: an action becomes a decision's label only if it beats the guide's by more
            than this (advantage in reward-scale units).
        vine_rel_margin: an action becomes a decision's label only if it also lowers the
            rollout's summed time in system by more than this fraction of the guide's action's
            (0: no such condition). In a crowded state hundreds of jobs' times add up, so an
            absolute margin lets small relative gains through there.
        vine_lr: Adam rate of the distillation.
        vine_adv_norm: how the vine's advantages are scaled for PPO: ``batch`` (one root mean
            square over the update's samples) or ``decision`` (each evaluated decision's
            advantages divided by the spread of its own actions' costs, so that a crowded
            state, where one action moves the JCT of hundreds of jobs, weighs no more in the
            update than a small one: the per-group normalisation of GRPO, Shao et al. 2024).
        vine_future: the vine's rollouts run on the episode's trace, arrivals still to come
            included (hindsight labels); false: on a copy holding only the jobs already
            arrived, so a label is a function of the state (the lookahead scheduler's label
            restricted to the env's actions; :meth:`CriusEnv.rollout_cost`).
        vine_rollout_policy: a saved policy (``.zip``) that decides everything after each
            evaluated action instead of the guide: the previous round of expert iteration
            (:mod:`crius_gym.rl.network_rollouts`; rollouts over the jobs present, the
            branches of one decision batched). None: the guide.
        vine_horizon_s: truncate those network rollouts this many simulated seconds after the
            decision (None: to the end of the jobs present).
        init_policy: start from this saved policy's weights (``.zip``) instead of the
            untrained network (a round of expert iteration continues the previous one).
        rollout_workers: processes computing the vine's rollouts (0: the training process).
        eval_freq: decisions between validation evaluations.
        eval_traces: validation traces per validation scenario.
        eval_scenarios: validation scenarios (empty: the training scenario).
        checkpoint_freq: decisions between checkpoints.
        keep_checkpoints: exact checkpoints kept (the newest; 0: all of them, e.g. to evaluate
            every checkpoint of a run afterwards).
        deploy_margins: guide margins (logits) tried after training; the saved policy departs
            from the guide only where it prefers its own action by at least the chosen one
            (empty: no selection, the plain argmax).
        deploy_traces: validation traces per scenario for that selection.
        deploy_score: ``mean`` or ``worst`` over scenarios of the mean JCT ratio to Crius.
        deploy_stress_traces: long overloaded validation traces added per scenario (0: none).
        deploy_stress_load: offered load of those traces.
        deploy_stress_jobs: jobs per such trace.
        deploy_envelope_episodes: training episodes on which the deployed agent's envelope is
            measured (the most jobs it saw waiting; where more wait, the guide decides;
            :func:`crius_gym.rl.deviation.measure_envelope`); 0: no envelope.
        env: :class:`crius_gym.env.config.EnvConfig` overrides of the training envs.
    """

    policy: Literal["rowwise", "mlp"] = "rowwise"
    policy_kwargs: Mapping[str, Any] = field(default_factory=dict)
    total_timesteps: int = 200_000
    n_envs: int = 4
    vec_env: Literal["dummy", "subproc"] = "dummy"
    learning_rate: float | str = 1e-4
    n_steps: int = 512
    batch_size: int = 256
    n_epochs: int = 5
    gamma: float = 0.995
    gae_lambda: float = 0.95
    clip_range: float = 0.2
    ent_coef: float = 0.001
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: float | None = None
    warm_start: Literal["none", "crius"] = "crius"
    bc_episodes: int = 24
    bc_epochs: int = 30
    bc_learning_rate: float = 1e-3
    critic_episodes: int = 0
    critic_epochs: int = 10
    sequences: int = 0
    update_threads: int = 2
    vine_fraction: float = 0.0
    vine_actions: int = 3
    vine_distill_epochs: int = 0
    vine_distill_batches: int = 8
    vine_replay: int = 20_000
    vine_margin: float = 0.0
    vine_rel_margin: float = 0.0
    vine_lr: float = 1e-3
    vine_adv_norm: Literal["batch", "decision"] = "batch"
    vine_future: bool = True
    vine_rollout_policy: str | None = None
    vine_horizon_s: float | None = None
    init_policy: str | None = None
    rollout_workers: int = 0
    eval_freq: int = 20_000
    eval_traces: int = 4
    eval_scenarios: tuple[str, ...] = ()
    checkpoint_freq: int = 20_000
    keep_checkpoints: int = 2
    deploy_margins: tuple[float, ...] = ()
    deploy_traces: int = 4
    deploy_score: Literal["worst", "mean"] = "mean"
    deploy_stress_traces: int = 0
    deploy_stress_load: float = 1.2
    deploy_stress_jobs: int = 600
    deploy_envelope_episodes: int = 0
    env: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.policy not in ("rowwise", "mlp"):
            raise ConfigError("policy must be rowwise or mlp")
        if self.vec_env not in ("dummy", "subproc"):
            raise ConfigError("vec_env must be dummy or subproc")
        if self.warm_start not in ("none", "crius"):
            raise ConfigError("warm_start must be none or crius")
        if not 0.0 <= self.vine_rel_margin < 1.0:  # also refuses NaN
            raise ConfigError("vine_rel_margin must be in [0, 1)")
        if self.vine_adv_norm not in ("batch", "decision"):
            raise ConfigError("vine_adv_norm must be batch or decision")
        if not isinstance(self.keep_checkpoints, int) or self.keep_checkpoints < 0:
            raise ConfigError("keep_checkpoints must be an integer >= 0 (0: keep all)")
        for name in (
            "total_timesteps",
            "n_envs",
            "n_steps",
            "batch_size",
            "n_epochs",
            "eval_freq",
            "eval_traces",
            "checkpoint_freq",
            "critic_episodes",
            "critic_epochs",
            "sequences",
            "update_threads",
            "vine_actions",
            "vine_distill_epochs",
            "vine_distill_batches",
            "vine_replay",
            "rollout_workers",
            "bc_episodes",
            "bc_epochs",
            "deploy_traces",
            "deploy_stress_traces",
            "deploy_stress_jobs",
            "deploy_envelope_episodes",
        ):
            zero_ok = (
                "eval_traces",
                "critic_episodes",
                "sequences",
                "bc_epochs",
                "bc_episodes",
                "vine_actions",
                "vine_distill_epochs",
                "rollout_workers",
                "deploy_stress_traces",
                "deploy_envelope_episodes",
            )
            if getattr(self, name) < (0 if name in zero_ok else 1):
                raise ConfigError(f"{name} must be positive")
        if self.sequences and (self.n_envs % self.sequences or self.vec_env != "dummy"):
            raise ConfigError(
                f"sequences={self.sequences}: n_envs ({self.n_envs}) must be a multiple of it, "
                "with vec_env dummy"
            )
        # YAML gives a list (or one name): store an immutable tuple.
        names: Any = self.eval_scenarios
        object.__setattr__(
            self, "eval_scenarios", (names,) if isinstance(names, str) else tuple(names)
        )
        margins: Any = self.deploy_margins
        try:
            parsed = tuple(
                float(m) for m in ([margins] if isinstance(margins, (int, float, str)) else margins)
            )
        except (TypeError, ValueError):
            raise ConfigError(
                f"deploy_margins must be numbers >= 0 (or 'inf'), got {margins!r}"
            ) from None
        if any(not m >= 0 for m in parsed):
            raise ConfigError(f"deploy_margins must be >= 0, got {margins!r}")
        object.__setattr__(self, "deploy_margins", parsed)
        if not self.deploy_stress_load > 0:
            raise ConfigError(f"deploy_stress_load must be > 0, got {self.deploy_stress_load}")
        if self.deploy_score not in ("worst", "mean"):
            raise ConfigError(f"deploy_score must be worst or mean, got {self.deploy_score!r}")
        if not 0 < self.gamma <= 1 or not 0 < self.gae_lambda <= 1:
            raise ConfigError("gamma and gae_lambda must be in (0, 1]")
        learning_rate_schedule(self.learning_rate)  # validates "lin_<rate>"
        if not 0 <= self.vine_fraction <= 1:
            raise ConfigError("vine_fraction must be in [0, 1]")
        if self.vine_fraction and self.vec_env != "dummy":
            raise ConfigError("vine_fraction needs vec_env dummy")
        if self.vine_horizon_s is not None and not self.vine_horizon_s > 0:
            raise ConfigError(f"vine_horizon_s must be > 0 or null, got {self.vine_horizon_s}")
        if self.vine_rollout_policy is not None and self.vine_future:
            raise ConfigError(
                "vine_rollout_policy rolls out over the jobs present: set vine_future false"
            )
        for name in ("vine_rollout_policy", "init_policy"):
            path = getattr(self, name)
            if path is not None and not str(path).endswith(".zip"):
                raise ConfigError(f"{name} must be a saved policy's .zip file, got {path!r}")
        if self.bc_learning_rate <= 0:
            raise ConfigError("bc_learning_rate must be > 0")
        if self.target_kl is not None and self.target_kl <= 0:
            raise ConfigError("target_kl must be > 0 or null")

    def as_dict(self) -> dict[str, Any]:
        """Plain mapping (for the saved config)."""
        d = asdict(self)
        d["policy_kwargs"] = dict(self.policy_kwargs)
        d["env"] = dict(self.env)
        d["eval_scenarios"] = list(self.eval_scenarios)
        d["deploy_margins"] = ["inf" if m == float("inf") else m for m in self.deploy_margins]
        return d

    def ppo_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of MaskablePPO."""
        kwargs = {k: getattr(self, k) for k in PPO_KEYS}
        kwargs["learning_rate"] = learning_rate_schedule(self.learning_rate)
        kwargs["target_kl"] = self.target_kl
        return kwargs


def learning_rate_schedule(value: float | str) -> float | Callable[[float], float]:
    """A constant rate, or ``"lin_<rate>"``: linear decay from the rate to 0 (RL Zoo style).

    Raises:
        ConfigError: a string that is not ``lin_<positive number>``.
    """
    if isinstance(value, int | float):
        if value <= 0:
            raise ConfigError("learning_rate must be > 0")
        return float(value)
    if isinstance(value, str) and value.startswith("lin_"):
        try:
            start = float(value[4:])
        except ValueError:
            start = -1.0
        if start > 0:
            return _Linear(start)
    raise ConfigError(f"learning_rate {value!r}: a number or 'lin_<rate>'")


@dataclass(frozen=True)
class _Linear:
    """``progress_remaining`` (1 → 0 over training) times the initial rate; picklable."""

    start: float

    def __call__(self, progress_remaining: float) -> float:
        return self.start * progress_remaining


def _parse_value(text: str) -> Any:
    value = load_yaml(text, f"--set value {text!r}")
    if isinstance(value, str):  # YAML 1.1 reads "1e-4" (no dot) as a string
        try:
            return float(value)
        except ValueError:
            return value
    return value


def resolve_hyperparams(
    scenario: str, path: str | Path = DEFAULT_AGENTS_FILE, overrides: Sequence[str] = ()
) -> PPOHyperparams:
    """``default`` ← the scenario's block ← ``key=value`` overrides (``env.x=1`` sets env keys).

    Raises:
        InputFileError: the YAML is malformed or names an unknown key (file and key named).
    """
    raw = load_yaml_file(path) or {}  # its errors name the file, line and key
    if not isinstance(raw, Mapping):
        raise InputFileError(path, "expected a mapping of blocks (default, then one per scenario)")
    merged: dict[str, Any] = {}
    known = {f.name for f in fields(PPOHyperparams)}
    for block in ("default", scenario):
        values = raw.get(block) or {}
        if not isinstance(values, Mapping):
            raise InputFileError(path, "must be a mapping", field=block)
        for k, v in values.items():
            if k not in known:
                raise InputFileError(
                    path, f"unknown key; known: {', '.join(sorted(known))}", field=f"{block}.{k}"
                )
            if k == "env":
                merged["env"] = {**merged.get("env", {}), **v}
            else:
                merged[k] = v
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"override {item!r} must look like key=value")
        if key.startswith("env."):
            merged["env"] = {**merged.get("env", {}), key[4:]: _parse_value(value)}
        elif key.startswith("policy_kwargs."):
            merged["policy_kwargs"] = {
                **merged.get("policy_kwargs", {}),
                key[14:]: _parse_value(value),
            }
        elif key in known:
            merged[key] = _parse_value(value)
        else:
            raise ConfigError(f"override {key!r}: unknown key; known: {', '.join(sorted(known))}")
    try:
        return PPOHyperparams(**merged)
    except (TypeError, ConfigError) as exc:
        raise InputFileError(path, str(exc), field=scenario) from exc


def make_model(
    hp: PPOHyperparams, venv: VecEnv, seed: int, tensorboard_log: str | None
) -> SequencePPO:
    """A fresh MaskablePPO (a :class:`SequencePPO` when ``sequences`` > 0) on CPU."""
    policy: Any = RowScorerPolicy if hp.policy == "rowwise" else "MultiInputPolicy"
    return SequencePPO(
        policy,
        venv,
        sequences=hp.sequences,
        update_threads=hp.update_threads,
        vine_fraction=hp.vine_fraction,
        vine_actions=hp.vine_actions,
        vine_distill_epochs=hp.vine_distill_epochs,
        vine_distill_batches=hp.vine_distill_batches,
        vine_replay=hp.vine_replay,
        vine_margin=hp.vine_margin,
        vine_rel_margin=hp.vine_rel_margin,
        vine_lr=hp.vine_lr,
        vine_adv_norm=hp.vine_adv_norm,
        vine_future=hp.vine_future,
        vine_rollout_policy=hp.vine_rollout_policy,
        vine_horizon_s=hp.vine_horizon_s,
        rollout_workers=hp.rollout_workers,
        device="cpu",
        seed=seed,
        verbose=0,
        tensorboard_log=tensorboard_log,
        policy_kwargs=dict(hp.policy_kwargs),
        **hp.ppo_kwargs(),
    )


def with_overrides(hp: PPOHyperparams, **changes: Any) -> PPOHyperparams:
    """A copy with some fields changed."""
    return replace(hp, **changes)
