import pytest

from crius_gym.bundled import list_scenarios
from crius_gym.errors import InputFileError, UnknownNameError
from crius_gym.scenarios import load_scenario


def test_required_scenarios_exist_and_load():
    names = set(list_scenarios())
    assert {"crius-testbed", "crius-sim-1280", "hetero-64", "tiny"} <= names
    sizes = {"crius-testbed": 64, "crius-sim-1280": 1280, "hetero-64": 64, "tiny": 8}
    for name, gpus in sizes.items():
        s = load_scenario(name)
        assert s.cluster.num_gpus == gpus and s.name == name


def test_hetero_64_has_four_types():
    s = load_scenario("hetero-64")
    assert len(s.cluster.gpu_types) == 4


def test_synthetic_splits_are_deterministic_and_disjoint():
    s = load_scenario("tiny")
    a = s.synthetic_trace("train", 0)
    assert a.jobs == s.synthetic_trace("train", 0).jobs
    val = s.held_out_traces("val")
    test = s.held_out_traces("test")
    assert len(val) == 2 and len(test) == 2
    keys = {
        tuple((j.model.name, j.iterations, j.arrival_s) for j in t.jobs) for t in [a, *val, *test]
    }
    assert len(keys) == 5
    assert all(j.requested_gpu_type in s.cluster.gpu_types for j in a.jobs)


def test_load_sets_the_arrival_rate():
    s = load_scenario("tiny")
    gap = s.synthetic_config().mean_interarrival_s
    assert gap > 0 and gap != s.workload.synthetic.mean_interarrival_s


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("cluster: []\n", "cluster"),
        ("cluster: [{gpu: a100, nodes: 1}]\nbogus: 1\n", "bogus"),
        ("cluster: [{gpu: k80, nodes: 1}]\n", "cluster"),
        ("cluster: [{gpu: a100, nodes: 1}]\nsim: {restore: 3}\n", "sim.restore"),
        ("cluster: [{gpu: a100, nodes: 1}]\ntuner: {max_gpus: 12}\n", "tuner"),
        ("cluster: [{gpu: a100, nodes: 1}]\nground_truth: oracle\n", "ground_truth"),
        ("cluster: [{gpu: a100, nodes: 1}]\nworkload: {load: -1}\n", "workload"),
        (
            "cluster: [{gpu: a100, nodes: 1}]\nworkload: {synthetic: {num_jobs: 0}}\n",
            "workload.synthetic",
        ),
        ("cluster: [{gpu: a100, nodes: 1}]\nframework: jax\n", "framework"),
    ],
)
def test_broken_scenarios_name_file_and_key(tmp_path, text, field):
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    with pytest.raises(InputFileError) as err:
        load_scenario(str(path))
    assert err.value.field == field
    assert str(path) in str(err.value)


def test_unknown_scenario_and_bad_yaml(tmp_path):
    with pytest.raises(UnknownNameError, match="hetero-64"):
        load_scenario("no-such-scenario")
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: [unclosed\n")
    with pytest.raises(InputFileError, match="YAML"):
        load_scenario(str(bad))
