"""Policy registry: name → factory. Unknown names list the choices."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from crius_gym.errors import UnknownNameError
from crius_gym.sim.policy import Policy

_FACTORIES: dict[str, Callable[..., Policy]] = {}
F = TypeVar("F", bound=Callable[..., Policy])


def register(name: str) -> Callable[[F], F]:
    """Class or function decorator registering a policy factory under ``name``."""

    def deco(factory: F) -> F:
        if name in _FACTORIES:
            raise ValueError(f"policy {name!r} registered twice")
        _FACTORIES[name] = factory
        return factory

    return deco


def available() -> tuple[str, ...]:
    """Registered policy names, sorted."""
    _load_builtin()
    return tuple(sorted(_FACTORIES))


def make_policy(name: str, **options: Any) -> Policy:
    """Build a registered policy.

    Raises:
        UnknownNameError: listing the registered policies.
    """
    _load_builtin()
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise UnknownNameError("policy", name, _FACTORIES) from None
    return factory(**options)


def _load_builtin() -> None:
    """Import every module of :mod:`crius_gym.policies` so their ``@register`` calls run."""
    import importlib
    import pkgutil

    import crius_gym.policies as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"{pkg.__name__}.{info.name}")
