"""docs/extending.md and its example stay true: the example runs, the doc's code runs."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

from crius_gym.policies import registry
from crius_gym.sim.policy import Policy
from tests.conftest import REPO

DOC = REPO / "docs" / "extending.md"
EXAMPLE = REPO / "docs" / "examples" / "srwf_policy.py"
MARKER = "<!-- runnable -->"
#: A repository file cited in backquotes, optionally with line numbers (``path.py:12-30``).
CITED = re.compile(
    r"`((?:crius_gym|docs|experiments|envs|agents|tests)/[\w./-]+\.\w+)(?::[\d-]+)?`"
)
#: A fenced Python block and the line before its fence (the runnable marker, or not).
BLOCK = re.compile(r"(?P<before>[^\n]*)\n```python\n(?P<code>.*?)\n```", re.DOTALL)


def _load_example() -> ModuleType:
    name = "docs_example_srwf_policy"
    spec = importlib.util.spec_from_file_location(name, EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


@pytest.fixture(scope="module")
def example() -> Iterator[ModuleType]:
    module = _load_example()
    yield module
    sys.modules.pop(module.__name__, None)


def _blocks() -> list[tuple[int, bool, str]]:
    """(line, runnable, code) of every Python block of the doc."""
    text = DOC.read_text(encoding="utf-8")
    out = []
    for m in BLOCK.finditer(text):
        line = text.count("\n", 0, m.start("code")) + 1
        out.append((line, m.group("before").strip() == MARKER, m.group("code")))
    return out


def test_example_policy_satisfies_the_protocol(example: ModuleType) -> None:
    policy: Policy = example.ShortestRemainingWorkFirst()
    assert policy.name == "srwf"
    assert policy.tick_interval_s is None
    assert "srwf" not in registry.available()  # the example registers nothing


def test_example_comparison_finishes_every_job(example: ModuleType) -> None:
    results = example.compare("tiny", 2)
    by_policy: dict[str, list[str]] = {}
    for r in results:
        by_policy.setdefault(r.policy, []).append(r.trace)
        assert r.summary.finished == r.summary.jobs, (r.policy, r.trace, r.summary)
        assert r.summary.unfinished == 0 and r.summary.rejected == 0
    assert list(by_policy) == ["srwf", "crius", "fcfs"]
    assert by_policy["srwf"] == ["tiny-test-0", "tiny-test-1"]
    assert all(traces == by_policy["srwf"] for traces in by_policy.values())


def test_example_main_prints_a_table(example: ModuleType, capsys: pytest.CaptureFixture[str]):
    example.main(["--scenario", "tiny", "--traces", "1"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [row.split("|")[1].strip() for row in rows] == ["policy", "srwf", "crius", "fcfs"]


def test_example_refuses_more_traces_than_the_split(example: ModuleType) -> None:
    with pytest.raises(ValueError, match="num_traces"):
        example.compare("tiny", 3)  # tiny has 2 test traces


def test_doc_python_blocks_compile() -> None:
    blocks = _blocks()
    assert sum(runnable for _, runnable, _ in blocks) >= 4, "the runnable marker was lost"
    for line, _, code in blocks:
        compile(code, f"{DOC}:{line}", "exec")


def test_doc_runnable_blocks_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # The blocks register a policy and import the example: undo both afterwards.
    registry.available()  # load the built-ins into the registry before copying it
    monkeypatch.setattr(registry, "_FACTORIES", dict(registry._FACTORIES))
    monkeypatch.setattr(registry, "_OPT_IN", set(registry._OPT_IN))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(REPO)
    imported = "srwf_policy" in sys.modules
    try:
        for line, runnable, code in _blocks():
            if runnable:
                namespace = {"__name__": f"extending_md_line_{line}"}
                exec(compile(code, f"{DOC}:{line}", "exec"), namespace)
    finally:
        if not imported:
            sys.modules.pop("srwf_policy", None)


def test_doc_cites_existing_files() -> None:
    text = DOC.read_text(encoding="utf-8")
    cited = set(re.findall(CITED, text))
    assert cited
    missing = sorted(p for p in cited if not (REPO / p).exists())
    assert not missing, f"docs/extending.md cites missing paths: {missing}"


def test_doc_excerpts_match_the_example() -> None:
    # The example's lines without their trailing comments (the excerpts leave them out).
    source = EXAMPLE.read_text(encoding="utf-8").splitlines()
    lines = {line.split("  # ")[0].strip() for line in source}
    excerpts = [code for _, runnable, code in _blocks() if not runnable]
    assert excerpts
    for code in excerpts:
        stale = [x.strip() for x in code.splitlines() if x.strip() and x.strip() not in lines]
        assert not stale, f"docs/extending.md quotes lines the example no longer has: {stale}"
