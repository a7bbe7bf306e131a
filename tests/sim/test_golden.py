"""Golden runs: FCFS and Crius on the tiny scenario's first test trace, compared to committed
per-job results. Regenerate deliberately with ``python tests/sim/test_golden.py`` (then review
the diff): a change here means the simulator, estimator or a policy changed behaviour."""

import csv
import sys
from pathlib import Path

import pytest

from crius_gym.policies.registry import make_policy
from crius_gym.scenarios import load_scenario

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
FIELDS = (
    "job_id",
    "status",
    "first_start_s",
    "finish_s",
    "jct_s",
    "queueing_s",
    "paused_s",
    "preemptions",
    "reconfigurations",
    "gpu_type",
    "num_gpus",
)


def run(policy):
    sc = load_scenario("tiny")
    return sc.make_simulator().run(sc.synthetic_trace("test", 0), make_policy(policy), seed=0)


def rows(result):
    return [{f: getattr(j, f) for f in FIELDS} for j in result.jobs]


@pytest.mark.parametrize("policy", ["fcfs", "crius"])
def test_golden(policy):
    with open(GOLDEN / f"tiny_{policy}.csv", newline="") as fh:
        expected = list(csv.DictReader(fh))
    got = rows(run(policy))
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        for f in FIELDS:
            if isinstance(g[f], float):
                assert g[f] == pytest.approx(float(e[f]), rel=1e-9, abs=1e-9, nan_ok=True), f
            else:
                assert str(g[f]) == e[f], f


if __name__ == "__main__":
    for policy in sys.argv[1:] or ["fcfs", "crius"]:
        with open(GOLDEN / f"tiny_{policy}.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, FIELDS)
            w.writeheader()
            for r in rows(run(policy)):
                w.writerow({k: repr(v) if isinstance(v, float) else v for k, v in r.items()})
        print(f"wrote {GOLDEN / f'tiny_{policy}.csv'}")
