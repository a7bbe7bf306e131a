"""Schedulers from outside the package: ``module:Class``, ``file.py:Class`` and entry points.

Every script that takes scheduler names resolves them here, so a researcher compares their own
policy without editing the library. A name is, in order:

1. a name the scenario defines (``policies:`` in its file) or a registered policy
   (:mod:`crius_gym.policies.registry`);
2. ``package.module:Attr`` — ``Attr`` (a :class:`~crius_gym.sim.policy.Policy` class or a
   factory returning one) imported from an importable module, as Gymnasium's
   ``entry_point="module:Class"``;
3. ``path/to/file.py:Attr`` — the same from a file that is not on ``sys.path``;
4. the name of an entry point in the group ``crius_gym.policies`` of an installed package
   (``[project.entry-points."crius_gym.policies"] srwf = "mypkg.srwf:SRWF"``).

The policy built from a plug-in keeps the name as given as its report name, so tables and
files say exactly what was run. :func:`check_policies` resolves every name and builds each
policy once before any run starts, so a typo fails in a second, not after hours of runs.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterable
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crius_gym.errors import ConfigError, UnknownNameError
from crius_gym.policies import registry

if TYPE_CHECKING:
    from crius_gym.scenarios import Scenario
    from crius_gym.sim.policy import Policy

ENTRY_POINT_GROUP = "crius_gym.policies"


def entry_point_names() -> tuple[str, ...]:
    """Names of the installed packages' policies (entry-point group ``crius_gym.policies``)."""
    return tuple(sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)))


def known_names(scenario: Scenario | None = None) -> tuple[str, ...]:
    """Every name :func:`make_policy` accepts without a ``:``.

    The registered names, the entry points' and the scenario's own definitions.
    """
    own = tuple(n for n, _ in scenario.policies) if scenario is not None else ()
    return tuple(sorted({*registry.available(), *entry_point_names(), *own}))


def _load_file(path: Path) -> Any:
    """Import a Python file as a module (named after its absolute path, so once per file)."""
    resolved = path.resolve()
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:10]
    name = f"crius_gym_plugin_{resolved.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before exec: pickling and dataclasses look the module up
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_attribute(spec: str, *, option: str = "--policies") -> Any:
    """The object ``spec`` (``module:Attr`` or ``file.py:Attr``; ``Attr`` may be dotted) names.

    Raises:
        ConfigError: naming ``option`` and saying what is missing (module, file or attribute).
    """
    where, _, attr = spec.rpartition(":")
    if not where or not attr:
        raise ConfigError(f"{option} {spec!r}: expected MODULE:ATTR or FILE.py:ATTR")
    if where.endswith(".py") or "/" in where or "\\" in where:
        path = Path(where)
        if not path.is_file():
            raise ConfigError(f"{option} {spec!r}: no file {path}")
        module = _load_file(path)
    else:
        try:
            module = importlib.import_module(where)
        except ModuleNotFoundError as exc:
            raise ConfigError(
                f"{option} {spec!r}: cannot import module {where!r} ({exc}); is its folder on "
                "PYTHONPATH, or give the file: path/to/file.py:ATTR"
            ) from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            public = sorted(n for n in vars(module) if not n.startswith("_"))
            raise ConfigError(
                f"{option} {spec!r}: {where} has no attribute {attr!r}; it has: "
                + ", ".join(public)
            ) from None
    return obj


def _factory(name: str, option: str) -> Callable[..., Policy] | None:
    """A plug-in's factory, or None for a name the registry or a scenario must answer."""
    if ":" in name:
        obj = load_attribute(name, option=option)
    else:
        eps = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
        if not eps or name in registry.available():
            return None
        obj = eps[0].load()
    if not callable(obj):
        raise ConfigError(f"{option} {name!r}: {obj!r} is not a class or function")
    factory: Callable[..., Policy] = obj
    return factory


def make_policy(
    name: str,
    *,
    scenario: Scenario | None = None,
    option: str = "--policies",
    **options: Any,
) -> Policy:
    """Build the policy ``name`` means (see the module docstring for the forms of a name).

    Args:
        name: a scenario's or registered name, ``module:Attr``, ``file.py:Attr`` or an entry
            point's name.
        scenario: the scenario whose definitions come first.
        option: the command-line option the name came from (for error messages).
        **options: keyword options of the factory.

    Raises:
        UnknownNameError: listing every known name.
        ConfigError: a plug-in that cannot be imported or does not build a policy.
    """
    factory = _factory(name, option)
    if factory is None:
        try:
            return registry.make_policy(name, scenario=scenario, **options)
        except UnknownNameError as exc:
            if exc.name != name:  # a scenario's definition names an unknown policy
                raise
            raise UnknownNameError(
                "policy", name, [*known_names(scenario), "MODULE:CLASS", "FILE.py:CLASS"]
            ) from None
    try:
        policy = factory(**options)
    except TypeError as exc:
        raise ConfigError(f"{option} {name!r}: {exc}") from exc
    missing = [a for a in ("decide", "reset") if not callable(getattr(policy, a, None))]
    if missing:
        raise ConfigError(
            f"{option} {name!r}: {type(policy).__name__} is not a Policy: no "
            + " or ".join(f"{m}()" for m in missing)
            + " (see docs/extending.md)"
        )
    policy.name = name
    if not hasattr(policy, "tick_interval_s"):
        policy.tick_interval_s = None
    return policy


def check_policies(
    names: Iterable[str], scenario: Scenario | None = None, *, option: str = "--policies"
) -> None:
    """Build every named policy once, so a bad name fails before any run starts.

    Raises:
        UnknownNameError | ConfigError | InputFileError: for the first bad name.
    """
    for name in names:
        make_policy(name, scenario=scenario, option=option)
