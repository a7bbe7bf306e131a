import pytest

from crius_gym.hardware.cluster import build_cluster
from crius_gym.perf.plan import PlanConstraints
from crius_gym.perf.tuner import Tuner, TunerConfig
from crius_gym.workload.models import load_model_catalog

CAT = load_model_catalog()


@pytest.mark.parametrize(
    "name,batch",
    [("bert-1.3b", 256), ("moe-10b", 512), ("wide_resnet-6.8b", 256), ("bert-6.7b", 128)],
)
def test_candidates_are_ranked_feasible_and_not_dominated(alpa, four_type_cluster, name, batch):
    cfg = TunerConfig(dominance_threshold=0.05)
    res = Tuner(four_type_cluster, alpa, cfg).tune(CAT.get(name), batch)
    assert res.feasible
    thr = [c.throughput for c in res.candidates]
    assert thr == sorted(thr, reverse=True)
    for c in res.candidates:
        g = four_type_cluster.group(c.cell.gpu_type)
        assert c.best.feasible
        n = c.num_gpus
        assert n <= cfg.max_gpus and n & (n - 1) == 0
        assert c.cell.layout.gpus_per_node <= g.gpus_per_node
        assert c.cell.layout.num_nodes <= g.num_nodes
        assert c.best.plan.pipeline == c.cell.stages
        smaller = [
            o for o in res.candidates if o.cell.gpu_type == c.cell.gpu_type and o.num_gpus < n
        ]
        assert all(c.throughput >= o.throughput * (1 + cfg.dominance_threshold) for o in smaller)
    # One Cell per (type, layout): the best stage count.
    keys = [(c.cell.gpu_type, c.cell.layout) for c in res.candidates]
    assert len(keys) == len(set(keys))
    s = res.stats
    assert 0 < s.plans_priced <= s.plans_exhaustive < s.plans_joint


def test_cache_and_determinism(alpa, four_type_cluster):
    tuner = Tuner(four_type_cluster, alpa)
    a = tuner.tune(CAT.get("bert-2.6b"), 256)
    assert tuner.tune(CAT.get("bert-2.6b"), 256) is a
    assert tuner.cache_hits == 1 and tuner.cache_misses == 1
    b = Tuner(four_type_cluster, alpa).tune(CAT.get("bert-2.6b"), 256)
    assert [(c.cell, c.iter_time_s) for c in a.candidates] == [
        (c.cell, c.iter_time_s) for c in b.candidates
    ]


def test_job_that_fits_nowhere(alpa):
    tiny = build_cluster([{"gpu": "t4", "nodes": 1, "gpus_per_node": 2}])
    res = Tuner(tiny, alpa).tune(CAT.get("bert-6.7b"), 512)
    assert not res.feasible and res.candidates == ()
    assert res.stats.cells_pruned_memory > 0


def test_max_gpus_and_candidate_cap(alpa, four_type_cluster):
    res = Tuner(four_type_cluster, alpa, TunerConfig(max_gpus=4, max_candidates=3)).tune(
        CAT.get("bert-760m"), 128
    )
    assert len(res.candidates) == 3
    assert all(c.num_gpus <= 4 for c in res.candidates)


def test_tuning_overhead_constants():
    cfg = TunerConfig()
    assert [cfg.tuning_overhead_s(n) for n in (1, 2, 4, 8, 16)] == [10, 20, 40, 40, 40]
    assert [cfg.tuning_overhead_s(n, pruned=False) for n in (1, 4, 8)] == [150, 600, 600]


def test_best_in_layout_for_data_parallel_only(alpa, four_type_cluster):
    from crius_gym.perf.plan import Layout

    tuner = Tuner(four_type_cluster, alpa)
    est = tuner.best_in_layout(
        CAT.get("bert-1.3b"), 256, "a40", Layout(2, 2), PlanConstraints(pipeline=1, tensor=1)
    )
    assert est is not None and est.plan.data == 4
    assert (
        tuner.best_in_layout(
            CAT.get("bert-1.3b"), 256, "a40", Layout(2, 2), PlanConstraints(pipeline=1, tensor=1)
        )
        is est
    )


def test_invalid_config():
    from crius_gym.errors import ConfigError

    with pytest.raises(ConfigError):
        TunerConfig(max_gpus=12)
