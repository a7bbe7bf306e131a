"""Schedulers from outside the package: ``module:Class``, ``file.py:Class``, entry points."""

from __future__ import annotations

import sys
import textwrap

import pytest

from crius_gym import plugins
from crius_gym.errors import ConfigError, UnknownNameError
from crius_gym.policies.registry import register
from crius_gym.scenarios import load_scenario
from tests.conftest import REPO

POLICY = textwrap.dedent(
    '''
    class Idle:
        """Never starts anything (every job ends unfinished or rejected)."""

        tick_interval_s = None

        def __init__(self, note: str = "") -> None:
            self.name = "idle"
            self.note = note

        def reset(self, context):
            pass

        def decide(self, snapshot):
            return []


    class NotAPolicy:
        pass
    '''
)


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch):
    (tmp_path / "my_sched.py").write_text(POLICY)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("my_sched", None)


def test_module_colon_class_builds_with_its_spec_as_name(plugin_dir):
    p = plugins.make_policy("my_sched:Idle", note="x")
    assert type(p).__name__ == "Idle" and p.name == "my_sched:Idle" and p.note == "x"


def test_file_colon_class_needs_no_sys_path(tmp_path):
    f = tmp_path / "elsewhere.py"
    f.write_text(POLICY)
    spec = f"{f}:Idle"
    p = plugins.make_policy(spec)
    assert p.name == spec and p.tick_interval_s is None


def test_registered_and_scenario_names_still_resolve():
    assert plugins.make_policy("fcfs").name == "fcfs"
    sc = load_scenario("crius-sim-1280-artifact")  # redefines crius as crius-artifact
    assert plugins.make_policy("crius", scenario=sc).name == "crius"


def test_unknown_name_lists_what_is_known():
    with pytest.raises(UnknownNameError) as err:
        plugins.check_policies(["crius", "srwf"])
    msg = str(err.value)
    assert "unknown policy 'srwf'" in msg and "crius" in msg and "MODULE:CLASS" in msg
    assert "policys" not in msg


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("no_such_module_xyz:Idle", "cannot import module"),
        ("my_sched:Nope", "has no attribute 'Nope'"),
        ("my_sched:NotAPolicy", "is not a Policy"),
        ("/no/such/file.py:Idle", "no file"),
        ("my_sched:", "expected MODULE:ATTR"),
    ],
)
def test_bad_plugins_say_what_is_wrong(plugin_dir, spec, says):
    with pytest.raises(ConfigError, match=says):
        plugins.make_policy(spec)


def test_a_bad_option_names_the_option(plugin_dir):
    with pytest.raises(ConfigError, match="--policy-option 'my_sched:Idle'"):
        plugins.make_policy("my_sched:Idle", option="--policy-option", speed=3)


def test_entry_points_resolve(monkeypatch, plugin_dir):
    from importlib.metadata import EntryPoint

    ep = EntryPoint(name="idle-ep", value="my_sched:Idle", group=plugins.ENTRY_POINT_GROUP)
    monkeypatch.setattr(plugins, "entry_points", lambda group: [ep] if group == ep.group else [])
    assert "idle-ep" in plugins.known_names()
    p = plugins.make_policy("idle-ep")
    assert type(p).__name__ == "Idle" and p.name == "idle-ep"


def test_a_user_cannot_shadow_a_builtin_name():
    def factory():  # defined here, i.e. outside crius_gym.policies
        raise AssertionError("never built")

    with pytest.raises(ValueError, match="already registered"):
        register("crius")(factory)


def test_a_plugin_guide_drives_the_env_as_it_drives_the_simulator():
    """env.guide takes a plug-in: following its proposals is its own simulator run."""
    from crius_gym.env.cluster_env import CriusEnv

    spec = f"{REPO / 'docs' / 'examples' / 'srwf_policy.py'}:ShortestRemainingWorkFirst"
    sc = load_scenario("tiny")
    env = CriusEnv(sc, config={"guide": spec})
    trace = sc.synthetic_trace("test", 0)
    env.reset(options={"trace": trace})
    done = False
    while not done:
        _, _, terminated, truncated, info = env.step(env.guide_action())
        done = terminated or truncated
    direct = sc.make_simulator().run(trace, plugins.make_policy(spec), seed=0)
    assert info["episode_metrics"]["avg_jct_s"] == pytest.approx(direct.summary.avg_jct_s)
    with pytest.raises(UnknownNameError, match="MODULE:CLASS"):
        CriusEnv(sc, config={"guide": "no-such-guide"})
