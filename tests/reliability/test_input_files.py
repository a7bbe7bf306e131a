"""Bad input files get an error naming the file (and the line or key where there is one):
non-UTF-8 traces, measurements, scenarios and agent files; misspelt node-group keys; a cluster
with more GPU types than the observation holds (issue 14, items 3 and 5)."""

import numpy as np
import pytest

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.errors import ConfigError, InputFileError
from crius_gym.perf.measurements import read_measurements
from crius_gym.rl.ppo import resolve_hyperparams
from crius_gym.scenarios import load_scenario
from crius_gym.sim.actions import InvalidActionError
from crius_gym.workload.arena_trace import read_arena_trace

LATIN1 = "caf\xe9".encode("latin-1")  # not UTF-8


def write_bad(path, header: str, good_lines: int = 2):
    body = header.encode() + b"\n" + b"".join(b"ok\n" for _ in range(good_lines)) + LATIN1 + b"\n"
    path.write_bytes(body)
    return good_lines + 2  # the line of the bad byte


@pytest.mark.parametrize(
    ("reader", "header"),
    [
        (read_arena_trace, "job_id,arrival_time,model,batch_size,num_iteration,gpu_type,gpu_num"),
        (read_measurements, "model_family,dtype,global_batch,gpu_type,num_nodes,gpus_per_node"),
    ],
    ids=["trace", "measurements"],
)
def test_non_utf8_csv_names_file_and_line(tmp_path, reader, header):
    path = tmp_path / "bad.csv"
    line = write_bad(path, header)
    with pytest.raises(InputFileError, match=r"not UTF-8") as err:
        reader(path)
    assert err.value.path == str(path) and err.value.row == line


def test_non_utf8_scenario_and_agent_file(tmp_path):
    scen = tmp_path / "s.yaml"
    scen.write_bytes(b"name: s\ndescription: " + LATIN1 + b"\n")
    with pytest.raises(InputFileError, match=r"s.yaml, line 2: not UTF-8"):
        load_scenario(str(scen))
    agents = tmp_path / "a.yaml"
    agents.write_bytes(b"default:\n  n_envs: 2 # " + LATIN1 + b"\n")
    with pytest.raises(InputFileError, match=r"a.yaml, line 2: not UTF-8"):
        resolve_hyperparams("tiny", agents)


def scenario_file(tmp_path, group: str) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(f"name: c\ncluster:\n  - {group}\nworkload: {{synthetic: {{num_jobs: 10}}}}\n")
    return str(path)


def test_misspelt_node_group_key_is_refused(tmp_path):
    path = scenario_file(tmp_path, "{gpu: a100, nodes: 1, gpus_per_nod: 2}")
    with pytest.raises(
        InputFileError, match=r"field 'cluster'.*unknown key\(s\) \['gpus_per_nod'\]"
    ):
        load_scenario(path)


def test_node_group_must_be_a_mapping(tmp_path):
    path = scenario_file(tmp_path, "a100")
    with pytest.raises(InputFileError, match=r"node group #1 must be a mapping"):
        load_scenario(path)


def test_more_gpu_types_than_the_observation_holds_is_refused():
    with pytest.raises(ConfigError, match=r"4 GPU types .* max_gpu_types is 2"):
        CriusEnv("crius-sim-1280", {"max_gpu_types": 2})


# ---------------------------------------------------------------------------- env API misuse
@pytest.fixture(scope="module")
def tiny_env():
    env = CriusEnv("tiny")
    env.reset(seed=0)
    return env


@pytest.mark.parametrize("action", [0.9, "0", True, np.float32(1.0), np.array([1, 2])], ids=repr)
def test_env_refuses_actions_that_are_not_integers(tiny_env, action):
    with pytest.raises(InvalidActionError, match="must be"):
        tiny_env.step(action)


def test_env_accepts_numpy_integers(tiny_env):
    tiny_env.reset(seed=0)
    wait = tiny_env.config.num_actions - 1
    tiny_env.step(np.int64(wait))
    tiny_env.step(np.array(wait))


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"spilt": "val"}, r"unknown key\(s\) \['spilt'\]"),
        ({"split": "holdout"}, "split 'holdout' not in"),
        ({"split": "val", "index": 99}, "index 99 out of range"),
        ({"split": "test", "index": -1}, "out of range"),
        ({"component": 3}, "component 3 out of range"),
        ({"split": "val", "index": "0"}, "index must be an integer"),
        ({"trace": 7}, "trace must be a Trace or a trace file's path"),
        ({"trace_format": "csv"}, "trace_format and trace_seed need a trace file"),
    ],
)
def test_env_refuses_unknown_reset_options(tiny_env, options, match):
    with pytest.raises(ConfigError, match=match):
        tiny_env.reset(options=options)


def test_unknown_model_in_model_mix_names_file_and_key(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(
        "name: m\ncluster:\n  - {gpu: a100, nodes: 1, gpus_per_node: 4}\n"
        "workload: {synthetic: {num_jobs: 5, model_mix: {bert-760m: 1, gpt-99t: 1}}}\n"
    )
    with pytest.raises(
        InputFileError, match=r"m\.yaml, field 'workload\.synthetic\.model_mix'.*gpt-99t"
    ):
        load_scenario(str(path))


def test_relative_trace_path_is_relative_to_the_scenario_file(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "t.yaml"
    path.write_text(
        "name: t\ncluster:\n  - {gpu: a100, nodes: 1, gpus_per_node: 4}\n"
        "workload: {trace: traces/mine.csv}\n"
    )
    monkeypatch.chdir(tmp_path)
    sc = load_scenario(str(path))
    assert sc.workload.trace == str(tmp_path / "sub" / "traces" / "mine.csv")
