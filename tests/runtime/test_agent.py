"""Node agents without Ray: emulation speed, checkpoints, preempt-and-resume keeps progress."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from crius_gym.runtime.agent import LaunchSpec, NodeAgent, read_checkpoint


def _spec(tmp: Path, key: str, progress: float, **kw: object) -> LaunchSpec:
    base = dict(
        key=key,
        index=3,
        nodes=(("a40", 0),),
        gpus_per_node=2,
        leader=True,
        iterations=1000,
        progress_iters=progress,
        iter_time_s=1.0,
        pause_s=0.0,
        time_scale=10_000.0,  # 10,000 iterations per wall second
        checkpoint_every_s=20.0,
        checkpoint_dir=str(tmp),
    )
    base.update(kw)
    return LaunchSpec(**base)  # type: ignore[arg-type]


def test_stop_saves_progress_and_resume_continues_from_it(tmp_path: Path) -> None:
    async def scenario() -> tuple[float, float, str]:
        agent = NodeAgent([("a40", 0, 2)])
        first = asyncio.ensure_future(agent.run(_spec(tmp_path, "job3#1", 0.0)))
        await asyncio.sleep(0.03)  # ~300 iterations
        saved = await agent.stop("job3#1")
        assert (await first)["status"] == "stopped"
        assert saved is not None
        on_disk, _ = read_checkpoint(tmp_path, 3)
        result = await agent.run(_spec(tmp_path, "job3#2", on_disk))
        return saved, on_disk, str(result["status"])

    saved, on_disk, status = asyncio.run(scenario())
    assert 50 < saved < 1000
    assert on_disk == pytest.approx(saved)  # a graceful stop loses nothing
    assert status == "finished"


def test_periodic_checkpoints_hold_whole_iterations(tmp_path: Path) -> None:
    async def scenario() -> None:
        agent = NodeAgent([("a40", 0, 2)])
        await agent.run(_spec(tmp_path, "job3#1", 0.0))

    asyncio.run(scenario())
    progress, count = read_checkpoint(tmp_path, 3)
    assert count >= 40  # 1,000 s of iterations, one checkpoint per 20 s
    assert progress == int(progress) and progress < 1000


def test_agent_refuses_gpus_it_does_not_have(tmp_path: Path) -> None:
    async def scenario() -> None:
        agent = NodeAgent([("a40", 0, 2)])
        await agent.hold(_spec(tmp_path, "a#1", 0.0, leader=False))
        with pytest.raises(RuntimeError, match="GPUs free"):
            await agent.hold(_spec(tmp_path, "b#1", 0.0, leader=False))
        await agent.stop("a#1")
        await agent.hold(_spec(tmp_path, "b#1", 0.0, leader=False))

    asyncio.run(scenario())


def test_a_stop_that_overtakes_its_launch_cancels_it(tmp_path: Path) -> None:
    async def scenario() -> dict[str, object]:
        agent = NodeAgent([("a40", 0, 2)])
        assert await agent.stop("job3#1") is None
        out = await agent.run(_spec(tmp_path, "job3#1", 0.0))
        assert (await agent.used_gpus()) == {"a40:0": 0}
        return out

    assert asyncio.run(scenario())["status"] == "stopped"
