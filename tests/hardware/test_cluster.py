import pytest

from crius_gym.errors import ConfigError, UnknownNameError
from crius_gym.hardware.cluster import build_cluster
from crius_gym.perf.plan import Layout
from crius_gym.perf.tuner import layouts_for


def test_build_cluster_defaults_and_totals():
    c = build_cluster(
        [
            {"gpu": "a100", "nodes": 2, "gpus_per_node": 4},
            {"gpu": "a10", "nodes": 3, "gpus_per_node": 2, "nics_per_node": 2},
        ]
    )
    assert c.num_gpus == 14 and c.num_nodes == 5
    assert c.gpu_types == ("a100-40gb", "a10")
    assert c.group("a10").node_bandwidth_gbps == pytest.approx(50.0)
    assert c.group("a100-40gb").intra_link.name == "nvlink3"


def test_duplicate_gpu_type_rejected():
    with pytest.raises(ConfigError, match="more than one node group"):
        build_cluster([{"gpu": "a40", "nodes": 1}, {"gpu": "A40", "nodes": 2}])


def test_unknown_gpu_and_link():
    with pytest.raises(UnknownNameError):
        build_cluster([{"gpu": "tpu", "nodes": 1}])
    with pytest.raises(UnknownNameError):
        build_cluster([{"gpu": "a40", "nodes": 1, "inter_link": "carrier-pigeon"}])


def test_layouts_respect_node_size_and_count():
    c = build_cluster([{"gpu": "v100", "nodes": 2, "gpus_per_node": 16}])
    g = c.group("v100-32gb")
    assert layouts_for(g, 4) == [Layout(1, 4), Layout(2, 2)]
    assert layouts_for(g, 32) == [Layout(2, 16)]
    assert layouts_for(g, 64) == []
