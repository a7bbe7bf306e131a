"""YAML means one thing (issue 37, item 2): every YAML reader refuses a key given twice, at any
depth, naming the file, both physical lines and the key; and a syntax error names its physical
line. The rule is enforced in one place (crius_gym/yamlfile.py), and the first test checks that
no other module of the package or the scripts parses YAML with PyYAML's own loaders."""

from __future__ import annotations

import ast
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from crius_gym.errors import CriusGymError, InputFileError
from crius_gym.hardware.gpus import load_gpu_catalog
from crius_gym.perf.calibration import load_calibrations
from crius_gym.pipeline.declaration import load_pipeline
from crius_gym.rl.ppo import resolve_hyperparams
from crius_gym.rl.saved import read_metadata
from crius_gym.scenarios import load_scenario
from crius_gym.workload.models import load_model_catalog
from crius_gym.yamlfile import load_yaml

ROOT = Path(__file__).resolve().parents[2]
PYYAML_LOADERS = {"safe_load", "load", "full_load", "unsafe_load", "safe_load_all", "load_all"}


def _pyyaml_loader_calls(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in PYYAML_LOADERS
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "yaml"
    ]


def test_no_module_parses_yaml_around_the_rule():
    files = sorted((ROOT / "crius_gym").rglob("*.py")) + sorted((ROOT / "experiments").glob("*.py"))
    offenders = {
        str(f.relative_to(ROOT)): lines
        for f in files
        if f.name != "yamlfile.py" and (lines := _pyyaml_loader_calls(f))
    }
    assert not offenders, f"parse YAML with crius_gym.yamlfile instead: {offenders}"


def _duplicate_a_nested_key(text: str) -> tuple[str, str, int, int]:
    """The text with its first indented one-line entry repeated on the next line.

    Returns the new text, the key, its first line and its second line (1-based, physical).
    """
    lines = text.split("\n")
    entry = re.compile(r"^(\s+)([A-Za-z_][\w-]*): +[^\s#|>&*'\"].*$")
    open_flows = 0  # inside a flow mapping or list continued over lines: not a block entry
    for i, line in enumerate(lines[:-1]):
        balance = line.count("{") + line.count("[") - line.count("}") - line.count("]")
        m = entry.match(line) if open_flows == 0 and balance == 0 else None
        open_flows += balance
        if m is None:
            continue
        following = lines[i + 1]
        indent = len(following) - len(following.lstrip())
        if not (following.strip() and indent > len(m[1])):
            return "\n".join([*lines[: i + 1], line, *lines[i + 1 :]]), m[2], i + 1, i + 2
    raise AssertionError("no indented scalar entry to duplicate")


def _scenario(path: Path) -> Any:
    return load_scenario(str(path))


def _agents(path: Path) -> Any:
    return resolve_hyperparams("tiny", path)


def _metadata(path: Path) -> Any:
    model = path.parent / "best_model.zip"
    model.write_bytes(b"")
    return read_metadata(model)


def _pipeline(path: Path) -> Any:
    return load_pipeline(path, data_dir=path.parent, root=path.parent)


READERS: dict[str, tuple[str, str, Callable[[Path], Any]]] = {
    # name: (a valid file of the repository, the name to give the copy, the reader)
    "scenario": ("envs/tiny.yaml", "tiny-copy.yaml", _scenario),
    "agents": ("agents/ppo.yaml", "ppo.yaml", _agents),
    "gpu catalogue": ("crius_gym/data/gpus.yaml", "gpus.yaml", lambda p: load_gpu_catalog(str(p))),
    "model catalogue": (
        "crius_gym/data/models.yaml",
        "models.yaml",
        lambda p: load_model_catalog(str(p)),
    ),
    "calibration": (
        "crius_gym/data/calibration.yaml",
        "calibration.yaml",
        lambda p: load_calibrations(str(p)),
    ),
    "policy metadata": ("results/reference_policy/metadata.yaml", "metadata.yaml", _metadata),
    "pipeline": ("experiments/pipeline.yaml", "pipeline.yaml", _pipeline),
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_reader_refuses_a_duplicated_key(tmp_path, reader):
    source, name, read = READERS[reader]
    text, key, first, second = _duplicate_a_nested_key((ROOT / source).read_text(encoding="utf-8"))
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CriusGymError) as err:
        read(path)
    message = str(err.value)
    assert str(path) in message
    assert f"line {second}" in message and f"first at line {first}" in message
    assert repr(key) in message


def test_the_copy_without_the_duplicate_is_read(tmp_path):
    """The readers above fail because of the duplicate, not because the copy is unreadable."""
    for reader, (source, name, read) in READERS.items():
        folder = tmp_path / reader.replace(" ", "_")
        folder.mkdir()
        shutil.copy(ROOT / source, folder / name)
        if reader == "pipeline":
            continue  # its stages name files relative to the repository; parsing is enough
        read(folder / name)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("a: 1\nb:\n  c: 2\n  # a comment\n\n  c: 3\n", 6),
        ("- {x: 1, y: 2, x: 3}\n", 1),
        ("top: 1\n# c\n# c\ntop: 2\n", 4),
        ("k:\n  - a: 1\n    b: 2\n    a: 1\n", 4),
    ],
)
def test_duplicates_at_any_depth_name_the_physical_line(text, line):
    with pytest.raises(InputFileError) as err:
        load_yaml(text, "f.yaml")
    assert err.value.row == line and err.value.path == "f.yaml"


def test_merge_keys_may_be_overridden():
    doc = load_yaml("base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  x: 3\n", "f.yaml")
    assert doc["d"] == {"x": 3, "y": 2}


def test_syntax_errors_name_the_physical_line():
    with pytest.raises(InputFileError, match="not valid YAML") as err:
        load_yaml("# header\n\na: 1\nb: c: d\n", "f.yaml")
    assert err.value.row == 4
