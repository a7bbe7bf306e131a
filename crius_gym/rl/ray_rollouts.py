"""Vine rollouts on Ray: one env per actor, on this machine or across a Ray cluster.

:class:`RayRolloutPool` answers the same ``submit(env, actions, ...)`` as the process pool
(:class:`~crius_gym.rl.rollout_pool.RolloutPool`) with Ray actors, each holding an env of the
scenario (:func:`~crius_gym.rl.rollout_pool.worker_env`). A decision's episode state is pickled
at once (the episode goes on), put in the object store, and its actions are costed by one actor
(round robin); the answer is the same function of the state as in a worker process
(:func:`~crius_gym.rl.rollout_pool.rollout_costs`), so a run gives the same weights on either
backend: the trainer uses the rollouts of a phase at the next update whatever the workers' speed.

An actor that dies (its node lost, its process killed) is replaced, and the rollouts it held are
run again on the new actor: :attr:`RayRolloutPool.retries` counts them, and each is logged.
Ray's own task retries are not used for this, so the count is exact.

``address``: None starts a private local Ray instance (``ray.init(address="local")``: it never
joins a cluster by accident); ``HOST:PORT`` (or ``auto``) joins an existing cluster, whose nodes
must have this package installed (docs/distributed.md).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from typing import Any

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.errors import ConfigError
from crius_gym.rl.rollout_pool import RolloutTask, rollout_costs, worker_env


class _RolloutActor:
    """One env of the scenario; answers the rollout costs of pickled episode states."""

    def __init__(self, scenario: str, config: EnvConfig) -> None:
        self._env = worker_env(scenario, config)

    def costs(
        self,
        blob: bytes,
        actions: list[int],
        future: bool,
        policy: str | None,
        horizon_s: float | None,
    ) -> list[float]:
        task: RolloutTask = (blob, actions, future, policy, horizon_s)
        return rollout_costs(self._env, task)

    def pid(self) -> int:
        import os

        return os.getpid()


class RayCosts:
    """The costs of one decision's actions, being computed by an actor.

    ``result()`` waits for them; if the actor died meanwhile, the task is run again on its
    replacement (counted in the pool's ``retries``).
    """

    def __init__(self, pool: RayRolloutPool, slot: int, args: tuple[Any, ...]) -> None:
        self._pool = pool
        self._slot = slot
        self._args = args  # the state's object ref first: Ray resolves top-level refs only
        self._actor = pool._actors[slot]
        self._ref = self._actor.costs.remote(*args)
        self._value: list[float] | None = None

    def result(self) -> list[float]:
        """The costs, in the order of the actions (waits; re-runs after an actor's death)."""
        import ray
        from ray.exceptions import RayActorError

        while self._value is None:
            try:
                self._value = list(ray.get(self._ref))
            except RayActorError as err:
                self._actor = self._pool._replace(self._slot, self._actor, err)
                self._ref = self._actor.costs.remote(*self._args)
        return self._value

    def done(self) -> bool:
        """Whether the answer is there (without waiting)."""
        import ray

        if self._value is not None:
            return True
        ready, _ = ray.wait([self._ref], timeout=0)
        return bool(ready)


class RayRolloutPool:
    """Ray actors answering rollout costs of episodes of one scenario.

    Args:
        scenario: scenario name or file (each actor builds its env from it; on a cluster, a
            file must exist at the same path on every node).
        config: the env settings of the episodes.
        actors: number of actors (each asks Ray for one CPU).
        address: None: a private local Ray instance; else a cluster's address (``HOST:PORT``
            or ``auto``).
        log: where actor deaths are reported.

    Raises:
        ConfigError: Ray is not installed (the ``ray`` extra).
    """

    def __init__(
        self,
        scenario: str,
        config: EnvConfig,
        actors: int,
        address: str | None = None,
        log: Callable[[str], None] = print,
    ) -> None:
        try:
            import ray
        except ImportError:
            raise ConfigError(
                "rollout backend 'ray' needs Ray: pip install 'crius-gym[ray]'"
            ) from None
        self._started = not ray.is_initialized()
        if self._started:
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if address is None:
                # The trainer is a Ray driver and needs no CPU of its own: the actors get one
                # each, even on a machine with fewer cores (they wait on the trainer anyway).
                import os

                kwargs["num_cpus"] = max(actors, os.cpu_count() or 1)
            ray.init(address=address or "local", **kwargs)
        self._remote = ray.remote(num_cpus=1)(_RolloutActor)
        self._scenario = scenario
        self._config = config
        self._log = log
        self._actors = [self._new() for _ in range(actors)]
        self._next = 0
        self.retries = 0

    def _new(self) -> Any:
        return self._remote.remote(self._scenario, self._config)

    def _replace(self, slot: int, dead: Any, err: BaseException) -> Any:
        """The actor at ``slot`` after ``dead`` died there (each caller re-runs its task)."""
        import ray

        self.retries += 1
        # Several pending tasks of one dead actor each land here: replace it once.
        if self._actors[slot] is dead:
            ray.kill(dead, no_restart=True)
            self._actors[slot] = self._new()
        self._log(
            f"rollout actor {slot} died ({type(err).__name__}); its rollouts run again on a new "
            f"actor (retries so far: {self.retries})"
        )
        return self._actors[slot]

    def submit(
        self,
        env: CriusEnv,
        actions: Sequence[int],
        future: bool = True,
        policy: str | None = None,
        horizon_s: float | None = None,
    ) -> RayCosts:
        """Start the costs of several actions of one decision (as ``RolloutPool.submit``)."""
        import ray

        blob = pickle.dumps(env.rollout_state(), protocol=pickle.HIGHEST_PROTOCOL)
        args = (ray.put(blob), list(actions), future, policy, horizon_s)
        slot = self._next
        self._next = (slot + 1) % len(self._actors)
        return RayCosts(self, slot, args)

    def actor(self, slot: int) -> Any:
        """The actor handle at ``slot`` (for tests: to kill one)."""
        return self._actors[slot]

    def close(self) -> None:
        """Stop the actors (and the local Ray instance this pool started)."""
        import ray

        for a in self._actors:
            ray.kill(a, no_restart=True)
        self._actors = []
        if self._started:
            ray.shutdown()
