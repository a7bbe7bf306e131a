"""Policy registry: name → factory. Unknown names list the choices.

A scenario may redefine names (``policies:`` in its file, e.g. ``crius: crius-artifact`` in
``crius-sim-1280-artifact``); :func:`make_policy` with ``scenario=`` resolves them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from crius_gym.errors import ConfigError, InputFileError, UnknownNameError
from crius_gym.sim.policy import Policy

if TYPE_CHECKING:
    from crius_gym.scenarios import Scenario

_FACTORIES: dict[str, Callable[..., Policy]] = {}
_OPT_IN: set[str] = set()  # left out of default_set()
F = TypeVar("F", bound=Callable[..., Policy])


def register(name: str, *, opt_in: bool = False) -> Callable[[F], F]:
    """Class or function decorator registering a policy factory under ``name``.

    Args:
        name: the registry name.
        opt_in: left out of "every heuristic" defaults (:func:`default_set`): for policies that
            cost much more per decision than a rule (a lookahead's rollouts); run by name.
    """

    def deco(factory: F) -> F:
        if not getattr(factory, "__module__", "").startswith(f"{__package__}."):
            _load_builtin()  # a user's name must not shadow a built-in loaded later
        if name in _FACTORIES:
            raise ValueError(
                f"policy {name!r} is already registered (by {_FACTORIES[name].__module__}); "
                "register yours under another name"
            )
        _FACTORIES[name] = factory
        if opt_in:
            _OPT_IN.add(name)
        return factory

    return deco


def available() -> tuple[str, ...]:
    """Registered policy names, sorted."""
    _load_builtin()
    return tuple(sorted(_FACTORIES))


def default_set() -> tuple[str, ...]:
    """Registered names that "every heuristic" means: all but the opt-in ones, sorted."""
    _load_builtin()
    return tuple(sorted(n for n in _FACTORIES if n not in _OPT_IN))


def make_policy(name: str, *, scenario: Scenario | None = None, **options: Any) -> Policy:
    """Build a registered policy, or what ``scenario`` says ``name`` means.

    A name the scenario redefines builds its registered policy with the scenario's options
    (``options`` given here override them) and keeps ``name`` as the policy's report name.

    Raises:
        UnknownNameError: listing the registered policies.
        InputFileError: the scenario's definition of ``name`` names an unknown policy or bad
            options (naming the scenario file and ``policies.<name>``).
    """
    _load_builtin()
    spec = scenario.policy_spec(name) if scenario is not None else None
    if spec is None:
        try:
            factory = _FACTORIES[name]
        except KeyError:
            raise UnknownNameError("policy", name, _FACTORIES) from None
        return factory(**options)
    assert scenario is not None
    where = f"policies.{name}"
    if spec.policy not in _FACTORIES:
        err = UnknownNameError("policy", spec.policy, _FACTORIES)
        raise InputFileError(scenario.path or scenario.name, str(err), field=where)
    try:
        policy = _FACTORIES[spec.policy](**{**dict(spec.options), **options})
    except (ConfigError, TypeError) as exc:
        raise InputFileError(scenario.path or scenario.name, str(exc), field=where) from exc
    policy.name = name
    return policy


def describe(name: str, scenario: Scenario | None = None) -> str:
    """What ``name`` runs: the registry's policy, or the scenario's definition of it."""
    spec = scenario.policy_spec(name) if scenario is not None else None
    return name if spec is None else f"{name} = {spec}"


def _load_builtin() -> None:
    """Import every module of :mod:`crius_gym.policies` so their ``@register`` calls run."""
    import importlib
    import pkgutil

    import crius_gym.policies as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"{pkg.__name__}.{info.name}")
