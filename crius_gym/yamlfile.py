"""Reading YAML the one way the project reads it: a key given twice is an error, not the last one.

PyYAML's loaders keep the last of two equal keys in a mapping, so a scenario or hyperparameter file
with ``load: 0.8`` and, twenty lines further down, ``load: 1.2`` silently means the second. Every
YAML reader of the project goes through :func:`load_yaml` or :func:`load_yaml_file` instead, which
refuse a duplicated key at any depth with the file, both physical line numbers and the key, and
report a syntax error at its physical line (``tests/reliability/test_yaml_rules.py`` checks that
no other module calls PyYAML's loaders).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode

from crius_gym.errors import InputFileError, utf8_text

_MERGE_TAG = "tag:yaml.org,2002:merge"


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, first_line: int, line: int) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key = key
        self.first_line = first_line
        self.line = line


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping that gives one key twice."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        """The mapping of ``node``, once its explicit keys are known to be distinct."""
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:  # '<<: *anchor' merges; explicit keys may override
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: PyYAML refuses it itself
                continue
            line = key_node.start_mark.line + 1
            if first is not None:
                raise _DuplicateKey(key, first, line)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str, source: str | Path) -> Any:
    """Parse YAML text from ``source`` (a file path, or a name such as ``--set``).

    Returns:
        The document (``None`` for an empty one), as :func:`yaml.safe_load` returns it.

    Raises:
        InputFileError: a key appears twice in one mapping (both physical lines and the key
            named), or the text is not valid YAML (its physical line named).
    """
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except _DuplicateKey as exc:
        raise InputFileError(
            source,
            f"key {exc.key!r} given twice (first at line {exc.first_line}); "
            "YAML would keep the last silently, so remove one",
            row=exc.line,
            field=str(exc.key),
        ) from exc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or str(exc)
        raise InputFileError(
            source,
            f"not valid YAML: {problem}",
            row=None if mark is None else mark.line + 1,
        ) from exc
    except yaml.YAMLError as exc:
        raise InputFileError(source, f"not valid YAML: {exc}") from exc


def load_yaml_file(path: str | Path) -> Any:
    """Read and parse a YAML file (UTF-8), with :func:`load_yaml`'s checks.

    Raises:
        InputFileError: the file cannot be read, is not UTF-8, or :func:`load_yaml` refuses it.
    """
    try:
        with utf8_text(path):
            text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputFileError(path, f"cannot read: {exc}") from exc
    return load_yaml(text, path)
