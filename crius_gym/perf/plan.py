"""Layouts, parallel plans and their priced estimates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from crius_gym.errors import ConfigError

Recompute = Literal["none", "selective", "full"]

#: The recomputation modes (Korthikanti et al. 2022): keep every activation, recompute only the
#: attention core (softmax, dropout, attention over V), or keep only each layer's input.
RECOMPUTE_MODES: tuple[Recompute, ...] = ("none", "selective", "full")


@dataclass(frozen=True, order=True)
class Layout:
    """Whole GPUs on ``num_nodes`` nodes, ``gpus_per_node`` on each (uniform, as in Crius)."""

    num_nodes: int
    gpus_per_node: int

    def __post_init__(self) -> None:
        if self.num_nodes < 1 or self.gpus_per_node < 1:
            raise ConfigError(f"layout {self}: nodes and GPUs per node must be >= 1")

    @property
    def num_gpus(self) -> int:
        """GPUs in the layout."""
        return self.num_nodes * self.gpus_per_node

    def __str__(self) -> str:
        return f"{self.num_nodes}x{self.gpus_per_node}"


@dataclass(frozen=True)
class Plan:
    """How a job runs on its GPUs.

    Attributes:
        pipeline: pipeline stages p.
        data: data-parallel degree d per stage.
        tensor: tensor-parallel degree t per stage (inside a node).
        microbatches: microbatches per iteration m (each of ``global_batch / (m·d)`` samples per
            data-parallel replica).
        recompute: activation recomputation: ``none``, ``selective`` (the attention core only)
            or ``full`` (each layer's input is kept, the layer re-run in the backward pass).
        interleave: virtual stages per GPU (interleaved 1F1B); 1 = plain 1F1B.
        sequence_parallel: the activations outside the tensor-parallel regions (layer norms,
            dropouts) are split over the tensor-parallel GPUs along the sequence (Korthikanti
            et al. 2022, §4.2.2); needs ``tensor`` > 1.
        distributed_optimizer: optimizer states (and the fp32 master weights) are split over the
            ``data`` ranks, gradients reduce-scattered and parameters all-gathered (Megatron-LM's
            distributed optimizer, ZeRO stage 1).
    """

    pipeline: int
    data: int
    tensor: int
    microbatches: int
    recompute: Recompute = "full"
    interleave: int = 1
    sequence_parallel: bool = False
    distributed_optimizer: bool = False

    def __post_init__(self) -> None:
        for name in ("pipeline", "data", "tensor", "microbatches", "interleave"):
            if getattr(self, name) < 1:
                raise ConfigError(f"plan {self}: {name} must be >= 1")
        if self.recompute not in RECOMPUTE_MODES:
            raise ConfigError(f"plan {self}: recompute must be one of {', '.join(RECOMPUTE_MODES)}")
        if self.sequence_parallel and self.tensor < 2:
            raise ConfigError(f"plan {self}: sequence parallelism needs tensor parallelism")

    @property
    def num_gpus(self) -> int:
        """GPUs the plan uses (p·d·t)."""
        return self.pipeline * self.data * self.tensor

    def __str__(self) -> str:
        rc = {"full": "rc", "selective": "sel", "none": "norc"}[self.recompute]
        v = f"v{self.interleave}" if self.interleave > 1 else ""
        sp = "sp" if self.sequence_parallel else ""
        do = "do" if self.distributed_optimizer else ""
        return f"p{self.pipeline}d{self.data}t{self.tensor}m{self.microbatches}{rc}{v}{sp}{do}"


@dataclass(frozen=True)
class Breakdown:
    """Where an iteration's time goes, seconds; the fields sum to the iteration time.

    The bottleneck stage's per-microbatch time is split into compute, intra-stage communication
    (tensor-parallel all-reduce, MoE all-to-all) and cross-stage communication and multiplied by
    the microbatch count; ``bubble_s`` is the pipeline fill and drain.

    Attributes:
        compute_s: the bottleneck stage's forward and backward compute per microbatch
            (recomputation included) times the microbatches.
        intra_stage_comm_s: communication inside a stage: tensor-parallel all-reduces (or
            sequence-parallel reduce-scatters and all-gathers) and MoE all-to-alls.
        cross_stage_comm_s: activations and gradients sent between pipeline stages.
        bubble_s: the pipeline's fill and drain.
        grad_sync_s: the data-parallel gradient synchronisation (with the distributed
            optimizer, its reduce-scatter and the parameters' all-gather), once per iteration,
            of the stage whose synchronisation plus optimizer step takes longest; plus, for
            gradients the framework synchronises after every microbatch (Alpa's
            convolutions), the bottleneck stage's per-microbatch synchronisation times the
            microbatches.
        optimizer_s: that stage's optimizer step.
        overhead_s: the framework's fixed per-iteration overhead (calibrated).
    """

    compute_s: float
    intra_stage_comm_s: float
    cross_stage_comm_s: float
    bubble_s: float
    grad_sync_s: float
    optimizer_s: float
    overhead_s: float

    @property
    def total_s(self) -> float:
        """Sum of the parts."""
        return (
            self.compute_s
            + self.intra_stage_comm_s
            + self.cross_stage_comm_s
            + self.bubble_s
            + self.grad_sync_s
            + self.optimizer_s
            + self.overhead_s
        )

    @property
    def communication_s(self) -> float:
        """All communication: intra-stage, cross-stage and gradient synchronisation."""
        return self.intra_stage_comm_s + self.cross_stage_comm_s + self.grad_sync_s


@dataclass(frozen=True)
class PlanEstimate:
    """A priced plan.

    Attributes:
        plan: the plan.
        iter_time_s: estimated iteration time, seconds.
        memory_gb: peak memory of the fullest GPU, GB.
        memory_limit_gb: usable memory per GPU under the framework, GB.
        breakdown: the iteration time by part.
    """

    plan: Plan
    iter_time_s: float
    memory_gb: float
    memory_limit_gb: float
    breakdown: Breakdown

    @property
    def feasible(self) -> bool:
        """The plan fits in usable memory."""
        return self.memory_gb <= self.memory_limit_gb


@dataclass(frozen=True)
class PlanConstraints:
    """Restrictions on the plan search; None leaves a dimension free.

    ``PlanConstraints(pipeline=1, tensor=1)`` is data parallelism only (the FCFS baseline);
    a measurement row with plan columns becomes the constraints of its own search.

    Attributes:
        pipeline: pipeline stages (``Plan.pipeline``).
        tensor: tensor-parallel degree per stage (``Plan.tensor``).
        microbatch_size: samples per microbatch per data-parallel replica, ``global_batch /
            (microbatches · data)``; a value the search would not try is priced anyway.
        recompute: activation recomputation (``Plan.recompute``).
        interleave: virtual stages per GPU (``Plan.interleave``).
        sequence_parallel: Megatron's sequence parallelism (``Plan.sequence_parallel``).
        distributed_optimizer: the sharded optimizer (``Plan.distributed_optimizer``).
    """

    pipeline: int | None = None
    tensor: int | None = None
    microbatch_size: int | None = None
    recompute: Recompute | None = None
    interleave: int | None = None
    sequence_parallel: bool | None = None
    distributed_optimizer: bool | None = None

    def admits(self, plan: Plan, global_batch: int) -> bool:
        """Whether ``plan`` satisfies every given restriction."""
        if self.pipeline is not None and plan.pipeline != self.pipeline:
            return False
        if self.tensor is not None and plan.tensor != self.tensor:
            return False
        if self.recompute is not None and plan.recompute != self.recompute:
            return False
        if self.interleave is not None and plan.interleave != self.interleave:
            return False
        if self.sequence_parallel is not None and plan.sequence_parallel != self.sequence_parallel:
            return False
        if (
            self.distributed_optimizer is not None
            and plan.distributed_optimizer != self.distributed_optimizer
        ):
            return False
        if self.microbatch_size is not None:
            per_replica = global_batch / (plan.microbatches * plan.data)
            if abs(per_replica - self.microbatch_size) > 1e-9:
                return False
        return True
