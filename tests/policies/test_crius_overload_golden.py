"""Golden decisions of Crius on an overloaded trace: every action of every decision, hashed.

The downgrade search and the upgrade pass take shortcuts under load (bounds that skip states
which cannot win, rankings carried across decisions).  They must not change a single decision:
the digests below were first recorded with the plain breadth-first search (git 4dd14d6, before
the shortcuts) and the current code must reproduce them.  Regenerate deliberately with
``python tests/policies/test_crius_overload_golden.py`` (a change means Crius decides
differently, so every report that runs it must be regenerated too).
"""

import dataclasses
import hashlib
import json
import sys
from pathlib import Path

import pytest

from crius_gym.policies.registry import make_policy
from crius_gym.scenarios import load_scenario

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "overload_crius.json"
# (policy, jobs): the default Crius deep enough into overload that more than 150 jobs run
# (the busy search depth), and the artifact variant that prices every layout.
CASES = (("crius", 2000), ("crius-artifact", 1000))


def run(policy: str, jobs: int) -> dict[str, object]:
    sc = load_scenario("crius-sim-1280")
    # Philly's own arrival rate, whatever the cluster serves: the queue grows without bound.
    sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, load=None))
    tuner = sc.make_tuner()
    trace = sc.synthetic_trace("test", 0, num_jobs=jobs, tuner=tuner)
    sim = sc.make_simulator(tuner)
    sim.config = dataclasses.replace(sim.config, record_timeseries=False)
    inner = make_policy(policy, scenario=sc)
    digest = hashlib.sha256()
    decide = inner.decide

    def recording(snapshot):  # type: ignore[no-untyped-def]
        actions = decide(snapshot)
        digest.update(repr(actions).encode())
        return actions

    inner.decide = recording  # type: ignore[method-assign]
    result = sim.run(trace, inner)
    return {
        "jobs": jobs,
        "decisions": result.summary.decisions,
        "reconfigurations": result.summary.reconfigurations,
        "avg_jct_s": result.summary.avg_jct_s,
        "digest": digest.hexdigest(),
    }


@pytest.mark.parametrize(("policy", "jobs"), CASES)
def test_overload_decisions_unchanged(policy: str, jobs: int) -> None:
    expected = json.loads(GOLDEN.read_text())[policy]
    got = run(policy, jobs)
    # The summary first: a readable difference before the digest says "something changed".
    for key in ("jobs", "decisions", "reconfigurations"):
        assert got[key] == expected[key], key
    assert got["avg_jct_s"] == pytest.approx(expected["avg_jct_s"], rel=1e-12)
    assert got["digest"] == expected["digest"]


if __name__ == "__main__":
    out = {policy: run(policy, jobs) for policy, jobs in CASES}
    GOLDEN.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {GOLDEN}", file=sys.stderr)
