"""Which source files a script depends on: the static import closure inside the repository.

A stage's code inputs are the files its scripts import, directly or through other modules of
the package, found by reading their ``import`` statements (also those inside functions), so
that the estimator's validation does not depend on the RL code and a new import extends a
stage's inputs without editing the declaration. Only modules that resolve to files under the
repository count; third-party packages are pinned by the environment, not hashed here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path


def _module_file(root: Path, dotted: str) -> Path | None:
    """The file of module ``dotted`` under ``root`` (``a/b.py`` or ``a/b/__init__.py``)."""
    base = root.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _package_inits(root: Path, dotted: str) -> list[Path]:
    """``__init__.py`` of every package on the way to ``dotted`` (importing runs them)."""
    parts = dotted.split(".")
    found = []
    for i in range(1, len(parts)):
        init = root.joinpath(*parts[:i]) / "__init__.py"
        if init.is_file():
            found.append(init)
    return found


def _module_name(root: Path, path: Path) -> str | None:
    try:
        rel = path.resolve().relative_to(root.resolve())
    except ValueError:
        return None
    parts = list(rel.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts) if parts else None


def _imported_names(path: Path, module: str | None) -> set[str]:
    """Dotted names imported by ``path`` (relative imports resolved against ``module``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if module is None:
                    continue
                parts = module.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                if keep < 0:
                    continue
                base = ".".join(parts[:keep])
                stem = f"{base}.{node.module}" if node.module else base
            else:
                stem = node.module or ""
            if not stem:
                continue
            names.add(stem)
            # ``from pkg import name`` may import a submodule ``pkg.name``.
            names.update(f"{stem}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


def _package_modules(root: Path, package: str) -> list[Path]:
    folder = root.joinpath(*package.split("."))
    return sorted(folder.rglob("*.py")) if folder.is_dir() else []


def import_closure(
    root: Path,
    scripts: Iterable[str | Path],
    dynamic: Mapping[str, Iterable[str]] | None = None,
) -> list[Path]:
    """Every repository file the given scripts import, themselves included, sorted.

    Args:
        root: the repository root (modules resolve against it).
        scripts: paths of Python files, relative to ``root`` or absolute.
        dynamic: imports no ``import`` statement shows: importing the key module imports every
            module of the packages listed (a registry that discovers its plug-ins with
            ``pkgutil``).

    Returns:
        Paths relative to ``root``.

    Raises:
        FileNotFoundError: a script does not exist.
    """
    root = root.resolve()
    todo: list[Path] = []
    for script in scripts:
        path = (root / script).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"{script}: no such script under {root}")
        todo.append(path)
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        module = _module_name(root, path)
        for package in (dynamic or {}).get(module or "", ()):
            todo.extend(p.resolve() for p in _package_modules(root, package))
        for name in _imported_names(path, module):
            target = _module_file(root, name)
            if target is None:
                continue
            todo.append(target.resolve())
            todo.extend(p.resolve() for p in _package_inits(root, name))
    return sorted(p.relative_to(root) for p in seen)
