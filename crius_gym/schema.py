"""JSON Schemas of the configuration files, generated from the frozen config dataclasses.

Editors validate and complete YAML against a JSON Schema (the YAML language server reads a
``# yaml-language-server: $schema=…`` first line). The schemas are generated, never written by
hand: pydantic's :class:`~pydantic.TypeAdapter` turns each dataclass's annotations into types,
and each property's description is its entry in the class docstring's ``Attributes:`` section.
The loaders keep their own validation, which names the file, key and field of every error and
checks what types alone cannot (ranges, cross-field rules).

pydantic is needed only to regenerate them (``python experiments/write_schemas.py``; the ``dev``
extra); the library never imports this module at run time.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

_ATTRIBUTE = re.compile(r"^(\s*)([A-Za-z_][A-Za-z0-9_]*)(?: \([^)]*\))?: (.*)$")


def attribute_docs(cls: type) -> dict[str, str]:
    """Descriptions of a class's attributes from its Google-style ``Attributes:`` section."""
    doc = inspect.getdoc(cls) or ""
    out: dict[str, str] = {}
    lines = doc.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Attributes:")
    except StopIteration:
        return out
    indent: int | None = None
    current: str | None = None
    for line in lines[start + 1 :]:
        if not line.strip():
            current = None
            continue
        width = len(line) - len(line.lstrip())
        match = _ATTRIBUTE.match(line)
        if match and (indent is None or width == indent):
            indent, current = width, match.group(2)
            out[current] = match.group(3).strip()
        elif current is not None and indent is not None and width > indent:
            out[current] += " " + line.strip()
        elif indent is not None and width < indent:
            break  # the next section
    return {k: " ".join(v.split()) for k, v in out.items()}


def _pairs_also_as_mapping(node: Any) -> Any:
    """Let a list of ``[key, value]`` pairs also be written as a mapping, as the loaders allow."""
    if isinstance(node, dict):
        node = {k: _pairs_also_as_mapping(v) for k, v in node.items()}
        items = node.get("items")
        if node.get("type") == "array" and isinstance(items, dict):
            pair = items.get("prefixItems")
            if items.get("type") == "array" and isinstance(pair, list) and len(pair) == 2:
                mapping = {"type": "object", "additionalProperties": pair[1]}
                described = {
                    k: node.pop(k) for k in ("title", "description", "default") if k in node
                }
                return {"anyOf": [node, mapping], **described}
        return node
    if isinstance(node, list):
        return [_pairs_also_as_mapping(v) for v in node]
    return node


def dataclass_schema(cls: type, *, all_optional: bool = True) -> dict[str, Any]:
    """The JSON Schema of a config dataclass's mapping form.

    Args:
        cls: a dataclass whose fields are plain types, tuples, literals or nested dataclasses.
        all_optional: a file may give any subset of the fields (the dataclass fills defaults).

    Returns:
        A schema with ``additionalProperties: false`` (unknown keys are errors, as in the
        loaders), each property described from the docstring, ``$defs`` for nested types.
    """
    from pydantic import TypeAdapter  # the dev extra; see the module docstring

    schema = TypeAdapter(cls).json_schema(mode="validation")
    defs = schema.get("$defs", {})
    for node in (schema, *defs.values()):
        if node.get("type") != "object":
            continue
        node["additionalProperties"] = False
        if all_optional:
            node.pop("required", None)
        owner = cls if node is schema else _by_name(cls, node.get("title", ""))
        docs = attribute_docs(owner) if owner is not None else {}
        if owner is not None:  # the summary paragraph; the attributes go to the properties
            summary = (inspect.getdoc(owner) or "").split("\n\n")[0]
            node["description"] = " ".join(summary.split())
        for name, prop in node.get("properties", {}).items():
            prop.pop("title", None)
            if isinstance(prop.get("default"), list) and len(prop["default"]) > 6:
                del prop["default"]  # a long table (fitted mixes): the docs show it better
            if name in docs:
                prop["description"] = docs[name]
    out: dict[str, Any] = _pairs_also_as_mapping(schema)
    return out


def _by_name(root: type, title: str) -> type | None:
    """The dataclass named ``title`` among ``root``'s field types (for nested descriptions)."""
    import dataclasses
    import typing

    seen: set[type] = set()
    todo = [root]
    while todo:
        cls = todo.pop()
        if cls in seen or not dataclasses.is_dataclass(cls):
            continue
        seen.add(cls)
        if cls.__name__ == title:
            return cls
        hints = typing.get_type_hints(cls)
        for hint in hints.values():
            for arg in (hint, *typing.get_args(hint)):
                if isinstance(arg, type):
                    todo.append(arg)
    return None
