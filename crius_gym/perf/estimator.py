"""Analytic estimator: iteration time and memory of a (model, batch, GPU type, layout, plan).

Computation and communication are priced separately (``docs/estimator.md``):

* per stage and microbatch: compute = FLOPs / (peak × η), with η = η_max,g · κ_family ·
  w / (w + w_half,g) and w the per-GPU GFLOP of the stage's microbatch — except kernels priced
  by occupancy (convolutions), each of which costs ``max(F, s·wave)`` FLOPs at η_max,g (F its
  per-GPU FLOPs, s the FLOPs of one output element: at least one full wave); tensor-parallel
  all-reduces over the intra-node link; MoE all-to-alls over the intra-node link or the node NIC;
  the boundary activation (forward) and its gradient (backward) to the next stage over the link
  between the two stages;
* per iteration: ``T = m·max_i t_i + (Σ_i t_i − max_i t_i)/v + max_i(DP_i + OPT_i) + c`` (the
  pipeline form of Alpa, Metis and AMP with interleaving degree v) — or, for a framework whose
  cross-stage transfers do not overlap compute (Alpa), the compute and transfer pipelines
  added: ``m·max_i c_i + m·max_i x_i + (Σ c − max c) + (Σ x − max x)``; DP_i the ring all-reduce of
  the stage's gradients over the slowest link of its data-parallel group, OPT_i the optimizer
  step's memory traffic; gradients of the layer kinds in the framework's
  ``microbatch_grad_sync`` (Alpa's convolutions) are all-reduced after every microbatch, inside
  the stage time;
* memory per GPU: model states (weights, gradients, optimizer states, the latter split over data
  parallelism with the plan's distributed optimizer) + activations of the microbatches in flight
  (1F1B: ``p − i`` at stage i; Korthikanti et al. 2022 per recomputation mode and sequence
  parallelism, :func:`stored_activation_bytes`; full recomputation keeps only cluster inputs
  plus one cluster's working set) + framework overhead; a plan is infeasible above the
  framework's usable fraction.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from crius_gym.hardware.cluster import NodeGroup
from crius_gym.perf.calibration import Calibration
from crius_gym.perf.cell import Cell, CellEstimate
from crius_gym.perf.framework import FrameworkProfile
from crius_gym.perf.layers import LayerCost, ModelCosts, model_costs
from crius_gym.perf.plan import (
    Breakdown,
    Layout,
    Plan,
    PlanConstraints,
    PlanEstimate,
    Recompute,
)
from crius_gym.workload.models import ModelSpec, MoESpec, TransformerSpec

#: Recomputation modes from the least to the most re-run work (time order at equal plan).
_RECOMPUTE_BY_TIME: tuple[Recompute, ...] = ("none", "selective", "full")

#: Bytes of memory traffic per locally held parameter in one optimizer step.
OPTIMIZER_STEP_BYTES = {"adamw": 28.0, "adafactor": 14.0, "sgd_momentum": 20.0}


def optimizer_state_bytes(optimizer: str, dtype_bytes: int) -> float:
    """Optimizer-state bytes per parameter, including an fp32 master copy for 16-bit weights."""
    master = 4.0 if dtype_bytes < 4 else 0.0
    per_opt = {"adamw": 8.0, "adafactor": 0.5, "sgd_momentum": 4.0}[optimizer]
    return master + per_opt


@dataclass(frozen=True)
class StageCosts:
    """Per-sample, forward costs of one pipeline stage (sums over its layers).

    Attributes:
        flops_rc: FLOPs of layers re-run under recomputation.
        flops_norc: FLOPs of layers never re-run (the head).
        params: dense parameters.
        expert_params: expert parameters.
        tp_elems: Σ over tensor-parallel all-reduces of their elements.
        tp_count: tensor-parallel all-reduces.
        a2a_elems: Σ over all-to-alls of their elements.
        a2a_count: all-to-alls.
        out_elems: elements sent to the next stage.
        act_fixed: stored activation bytes not split by TP (no recomputation).
        act_tp: stored activation bytes split by TP (no recomputation).
        ckpt_bytes: bytes kept under recomputation (inputs of the stage's clusters).
        clusters_ws: (fixed, TP-split) activation bytes of each cluster: the working set while
            one cluster is recomputed.
        layers: transformer/conv layers in the stage (for interleaving).
        flops_core: attention-core FLOPs (re-run under selective recomputation).
        act_core: attention-core activation bytes (not kept under selective recomputation;
            part of ``act_tp``).
        mb_sync_params: the part of ``params`` whose gradients are synchronised after every
            microbatch (:attr:`FrameworkProfile.microbatch_grad_sync`).
        occ_flops_rc, occ_flops_norc: the part of ``flops_rc`` and ``flops_norc`` in layers
            priced kernel by kernel (``LayerCost.kernels``).
        kernels_rc, kernels_norc: those layers' kernels (forward FLOPs per sample, FLOPs per
            output element), re-run under recomputation or not.
    """

    flops_rc: float
    flops_norc: float
    params: float
    expert_params: float
    tp_elems: float
    tp_count: int
    a2a_elems: float
    a2a_count: int
    out_elems: float
    act_fixed: float
    act_tp: float
    ckpt_bytes: float
    clusters_ws: tuple[tuple[float, float], ...]
    layers: int
    flops_core: float = 0.0
    act_core: float = 0.0
    mb_sync_params: float = 0.0
    occ_flops_rc: float = 0.0
    occ_flops_norc: float = 0.0
    kernels_rc: tuple[tuple[float, float], ...] = ()
    kernels_norc: tuple[tuple[float, float], ...] = ()


class PlanChain(NamedTuple):
    """Plans that differ only in recomputation and sequence parallelism, fastest first.

    Attributes:
        stages, data, tensor, microbatches, interleave, distributed_optimizer: the shared
            plan dimensions.
        variants: (recompute, sequence parallel) of each plan, in non-decreasing time order.
    """

    stages: int
    data: int
    tensor: int
    microbatches: int
    interleave: int
    distributed_optimizer: bool
    variants: tuple[tuple[Recompute, bool], ...]

    def plans(self) -> Iterator[Plan]:
        """The chain's plans, built one at a time (a search usually stops at the first)."""
        for rc, sp in self.variants:
            yield Plan(
                self.stages,
                self.data,
                self.tensor,
                self.microbatches,
                rc,
                self.interleave,
                sp,
                self.distributed_optimizer,
            )


def stored_activation_bytes(
    st: StageCosts, tensor: int, recompute: Recompute, sequence_parallel: bool
) -> float:
    """Activation bytes per sample a stage keeps for its backward pass, per GPU and microbatch.

    Korthikanti et al. 2022 (arXiv 2205.05198, Table 2), per transformer layer in 16-bit:
    ``s·h·(10 + 24/t + 5·a·s/(h·t))`` with tensor parallelism t; sequence parallelism also
    splits the ``10·s·h`` outside the tensor-parallel regions (``s·h·(34 + 5·a·s/h)/t``);
    selective recomputation drops the attention core's ``5·a·s²`` (``34·s·h/t`` with both);
    full recomputation keeps only each recomputation cluster's input (``2·s·h`` per layer when
    every layer is a cluster, ``/t`` with sequence parallelism) — its working set while a
    cluster is re-run is added by the caller.
    """
    sp = tensor if sequence_parallel else 1
    if recompute == "full":
        return st.ckpt_bytes / sp
    tp = st.act_tp - (st.act_core if recompute == "selective" else 0.0)
    return st.act_fixed / sp + tp / tensor


def _cluster_layers(layers: tuple[LayerCost, ...], count: int) -> list[list[LayerCost]]:
    """Cut the layer sequence into ``count`` contiguous groups of about equal FLOPs."""
    total = sum(x.flops for x in layers)
    if count >= len(layers) or total <= 0:
        return [[x] for x in layers]
    groups: list[list[LayerCost]] = [[]]
    acc = 0.0
    for x in layers:
        boundary = total * len(groups) / count
        # Close the current group when adding x would overshoot its boundary by more than
        # leaving it short would, keeping zero-FLOP layers (embeddings) with what follows.
        if groups[-1] and len(groups) < count and x.flops > 0 and acc + x.flops / 2 > boundary:
            groups.append([])
        groups[-1].append(x)
        acc += x.flops
    return groups


def _split_min_max(weights: list[float], parts: int) -> list[int]:
    """Sizes of ``parts`` contiguous groups of ``weights`` minimising the largest group sum."""
    n = len(weights)
    prefix = [0.0]
    for w in weights:
        prefix.append(prefix[-1] + w)
    inf = math.inf
    # best[k][i]: minimal max-sum splitting the first i items into k groups.
    best = [[inf] * (n + 1) for _ in range(parts + 1)]
    cut = [[0] * (n + 1) for _ in range(parts + 1)]
    best[0][0] = 0.0
    for k in range(1, parts + 1):
        for i in range(k, n - (parts - k) + 1):
            for j in range(k - 1, i):
                v = max(best[k - 1][j], prefix[i] - prefix[j])
                if v < best[k][i]:
                    best[k][i], cut[k][i] = v, j
    sizes: list[int] = []
    i = n
    for k in range(parts, 0, -1):
        j = cut[k][i]
        sizes.append(i - j)
        i = j
    return sizes[::-1]


def _aggregate(
    clusters: list[list[LayerCost]],
    prev_out: float,
    nbytes: int,
    mb_sync_kinds: tuple[str, ...] = (),
) -> StageCosts:
    layers = [x for c in clusters for x in c]
    ckpt = 0.0
    inp = prev_out
    ws = []
    for c in clusters:
        ckpt += inp * nbytes
        ws.append((sum(x.act_fixed_bytes for x in c), sum(x.act_tp_bytes for x in c)))
        inp = c[-1].out_elems
    return StageCosts(
        flops_rc=sum(x.flops for x in layers if x.recomputed),
        flops_norc=sum(x.flops for x in layers if not x.recomputed),
        params=sum(x.params for x in layers),
        expert_params=sum(x.expert_params for x in layers),
        tp_elems=sum(x.tp_allreduce_elems * x.tp_allreduces for x in layers),
        tp_count=sum(x.tp_allreduces for x in layers),
        a2a_elems=sum(x.a2a_elems * x.a2a_count for x in layers),
        a2a_count=sum(x.a2a_count for x in layers),
        out_elems=layers[-1].out_elems,
        act_fixed=sum(x.act_fixed_bytes for x in layers),
        act_tp=sum(x.act_tp_bytes for x in layers),
        ckpt_bytes=ckpt,
        clusters_ws=tuple(ws),
        layers=sum(1 for x in layers if x.kind in ("gemm", "conv")),
        flops_core=sum(x.core_flops for x in layers),
        act_core=sum(x.core_act_bytes for x in layers),
        mb_sync_params=sum(x.params for x in layers if x.kind in mb_sync_kinds),
        occ_flops_rc=sum(x.flops for x in layers if x.kernels and x.recomputed),
        occ_flops_norc=sum(x.flops for x in layers if x.kernels and not x.recomputed),
        kernels_rc=tuple(k for x in layers if x.recomputed for k in x.kernels),
        kernels_norc=tuple(k for x in layers if not x.recomputed for k in x.kernels),
    )


@functools.cache
def stage_costs(
    model: ModelSpec, framework: FrameworkProfile, stages: int
) -> tuple[StageCosts, ...] | None:
    """Split ``model`` into ``stages`` pipeline stages the way ``framework`` does.

    Returns:
        One record per stage, or None when the model has fewer partition units than stages.
    """
    costs: ModelCosts = model_costs(model)
    layers = costs.layers
    nbytes = costs.dtype_bytes
    n_clusters = framework.layer_clusters.get(model.family)
    if framework.partition == "even_layers":
        body = [x for x in layers if x.kind in ("gemm", "conv")]
        if stages > len(body):
            return None
        head = [x for x in layers if x.kind in ("embed",)]
        tail = [x for x in layers if x.kind in ("head",)]
        base, extra = divmod(len(body), stages)
        sizes = [base + (1 if i < extra else 0) for i in range(stages)]
        groups: list[list[list[LayerCost]]] = []
        start = 0
        for i, size in enumerate(sizes):
            chunk = body[start : start + size]
            start += size
            clusters = [[x] for x in chunk]
            if i == 0 and head:
                clusters[0] = [*head, *clusters[0]]
            if i == stages - 1 and tail:
                clusters[-1] = [*clusters[-1], *tail]
            groups.append(clusters)
    else:
        clusters = _cluster_layers(layers, n_clusters or len(layers))
        if stages > len(clusters):
            return None
        sizes = _split_min_max([sum(x.flops for x in c) for c in clusters], stages)
        groups = []
        start = 0
        for size in sizes:
            groups.append(clusters[start : start + size])
            start += size
    out: list[StageCosts] = []
    prev_out = 0.0
    for g in groups:
        out.append(_aggregate(g, prev_out, nbytes, framework.microbatch_grad_sync))
        prev_out = g[-1][-1].out_elems
    return tuple(out)


class Estimator:
    """Prices plans and finds the best plan of a Cell for one framework and calibration.

    Args:
        framework: how the framework executes plans.
        calibration: the framework's fitted constants.
    """

    def __init__(self, framework: FrameworkProfile, calibration: Calibration) -> None:
        self.framework = framework
        self.calibration = calibration

    # ------------------------------------------------------------------ plan enumeration
    def plans(
        self,
        model: ModelSpec,
        global_batch: int,
        layout: Layout,
        stages: int,
        gpus_per_node_cap: int,
        constraints: PlanConstraints | None = None,
    ) -> Iterator[Plan]:
        """Every plan the framework may run in a Cell (before memory checks).

        The framework's options are what a search tries; a dimension fixed by ``constraints``
        (a measured run's plan) takes the given value instead, also when the search would not
        try it (e.g. Megatron-LM microbatch size 3, or 4 microbatches under Alpa).

        Args:
            model: the model.
            global_batch: samples per iteration.
            layout: the Cell's node layout.
            stages: the Cell's pipeline stages.
            gpus_per_node_cap: GPUs per node of the node group (tensor parallelism stays inside
                a node and inside the GPUs the layout holds on it).
            constraints: fixed plan dimensions (None: all searched).
        """
        for chain in self._plan_chains(
            model, global_batch, layout, stages, gpus_per_node_cap, constraints, prune=False
        ):
            yield from chain.plans()

    def count_plans(
        self,
        model: ModelSpec,
        global_batch: int,
        layout: Layout,
        stages: int,
        gpus_per_node_cap: int,
    ) -> int:
        """How many plans :meth:`plans` gives (without building them)."""
        return sum(
            len(c.variants)
            for c in self._plan_chains(
                model, global_batch, layout, stages, gpus_per_node_cap, None, prune=False
            )
        )

    def _plan_chains(
        self,
        model: ModelSpec,
        global_batch: int,
        layout: Layout,
        stages: int,
        gpus_per_node_cap: int,
        constraints: PlanConstraints | None,
        *,
        prune: bool,
    ) -> Iterator[PlanChain]:
        """The plans of :meth:`plans` in dominance chains, for a search to stop early.

        A chain shares (p, d, t, m, v, distributed optimizer) and is ordered by non-decreasing
        iteration time: recomputation ``none``, ``selective``, ``full`` (each re-runs more),
        sequence parallelism off before on (it changes memory, not time). So the first
        memory-feasible plan of a chain is its fastest, and a search prices no further.

        With ``prune``, a plan without the distributed optimizer is left out when d > 1 and the
        framework may shard: sharding only removes optimizer-step time and memory, so the
        sharded twin is at least as fast and fits whenever the plan would.
        """
        cons = constraints or PlanConstraints()
        n = layout.num_gpus
        if stages < 1 or n % stages:
            return
        q = n // stages
        g = layout.gpus_per_node
        # Stage submeshes are slices of a node or whole nodes.
        if (q <= g and g % q) or (q > g and q % g):
            return
        fw = self.framework
        recompute = (cons.recompute,) if cons.recompute is not None else fw.recompute_options
        recompute = tuple(r for r in _RECOMPUTE_BY_TIME if r in recompute)
        seq_par = (
            (cons.sequence_parallel,)
            if cons.sequence_parallel is not None
            else fw.sequence_parallel_options
        )
        seq_par = tuple(sorted(set(seq_par)))  # off first
        dist_opt = (
            (cons.distributed_optimizer,)
            if cons.distributed_optimizer is not None
            else fw.distributed_optimizer_options
        )
        interleave = self._interleavings(model, stages, cons.interleave)
        t = 1
        while t <= min(q, g, gpus_per_node_cap, model.max_tensor_parallel):
            if (isinstance(model, TransformerSpec | MoESpec) and model.num_heads % t) or (
                cons.tensor is not None and t != cons.tensor
            ):
                t *= 2
                continue
            d = q // t
            variants = tuple((rc, sp) for rc in recompute for sp in seq_par if not (sp and t == 1))
            for m, b in self._microbatching(global_batch, d, cons.microbatch_size):
                if (
                    isinstance(model, MoESpec)
                    and b * d * model.seq_len < d * model.expert_group_size
                ):
                    continue  # fewer routing groups than data-parallel ranks
                for v in interleave:
                    if v > 1 and m % stages:
                        continue  # interleaving needs whole rounds of microbatches
                    for do in dist_opt:
                        if do and d == 1 and len(dist_opt) > 1:
                            continue  # nothing to shard over: the same plan twice
                        if prune and not do and d > 1 and True in dist_opt:
                            continue  # its sharded twin dominates it
                        if variants:
                            yield PlanChain(stages, d, t, m, v, do, variants)
            t *= 2

    def _interleavings(self, model: ModelSpec, stages: int, fixed: int | None) -> list[int]:
        """Virtual stages per GPU to try.

        Each v up to the framework's ``max_interleave`` (or the fixed one) that divides the
        layers of every stage; v > 1 needs two or more stages.
        """
        cap = self.framework.max_interleave if fixed is None else fixed
        wanted = [fixed] if fixed is not None else list(range(1, cap + 1))
        if stages == 1 or cap == 1:
            return [v for v in wanted if v == 1]
        body = sum(1 for x in model_costs(model).layers if x.kind in ("gemm", "conv"))
        if body % stages:  # uneven stages: only plain 1F1B
            return [v for v in wanted if v == 1]
        per_stage = body // stages
        return [v for v in wanted if per_stage % v == 0]

    def _microbatching(
        self, global_batch: int, data: int, fixed_size: int | None = None
    ) -> Iterator[tuple[int, float]]:
        """(microbatch count, samples per replica per microbatch) options.

        One option when the per-replica microbatch size is fixed.
        """
        fw = self.framework
        if fixed_size is not None:
            if global_batch % (data * fixed_size) == 0:
                yield global_batch // (data * fixed_size), float(fixed_size)
            return
        if fw.microbatches is not None:
            m = fw.microbatches
            b = global_batch / (m * data)
            if b >= 1:
                yield m, b
            return
        for b_int in fw.microbatch_sizes:
            if global_batch % (data * b_int) == 0:
                yield global_batch // (data * b_int), float(b_int)

    # ------------------------------------------------------------------ pricing
    def estimate(
        self, model: ModelSpec, global_batch: int, group: NodeGroup, layout: Layout, plan: Plan
    ) -> PlanEstimate | None:
        """Price one plan.

        Returns:
            The estimate (check ``feasible`` for memory), or None when the model cannot be cut
            into ``plan.pipeline`` stages.
        """
        stages = stage_costs(model, self.framework, plan.pipeline)
        if stages is None:
            return None
        fw, cal = self.framework, self.calibration
        costs = model_costs(model)
        gpu = group.gpu
        gcal = cal.gpu(gpu.name)
        nbytes = costs.dtype_bytes
        p, d, t, m, v = plan.pipeline, plan.data, plan.tensor, plan.microbatches, plan.interleave
        rc = plan.recompute == "full"
        selective = plan.recompute == "selective"
        q = d * t
        g = layout.gpus_per_node
        b = global_batch / (m * d)  # samples per replica per microbatch
        peak = gpu.peak_flops(model.dtype) * cal.family(model.family)
        work_scale = cal.work_scale(model.family)
        wave = cal.wave_elements
        per_layer_work = fw.efficiency_work == "layer"
        traffic = cal.activation_traffic
        lat = cal.collective_latency_s
        bw_intra = group.intra_link.bandwidth_gbps * 1e9 * cal.intra_link_efficiency
        bw_node = group.node_bandwidth_gbps * 1e9 * gcal.inter_node_efficiency
        stage_in_node = q <= g
        nodes_per_stage = max(1, q // g)
        gpus_of_stage_per_node = min(q, g)
        passes = 3.0 + (1.0 if rc else 0.0)
        grad_bytes = fw.gradient_bytes(model.dtype, nbytes)
        opt_bytes = optimizer_state_bytes(model.optimizer, nbytes)
        opt_step = OPTIMIZER_STEP_BYTES[model.optimizer]
        hbm = gpu.hbm_gbps * 1e9

        times: list[float] = []
        comps: list[float] = []
        intras: list[float] = []
        crosses: list[float] = []
        mb_syncs: list[float] = []
        sync_opt = 0.0
        sync_part = opt_part = 0.0
        mem_max = 0.0
        for i, st in enumerate(stages):
            flops = (passes * st.flops_rc + 3.0 * st.flops_norc) * b / t
            if selective:  # the attention core runs once more, before its backward
                flops += st.flops_core * b / t
            comp = 0.0
            if st.kernels_rc or st.kernels_norc:
                # Occupancy floor: a kernel with fewer than `wave` output elements per GPU
                # takes as long as one full wave (E·s FLOPs per GPU, s per output element).
                work = 0.0
                for f_k, s_k in st.kernels_rc:
                    work += passes * max(f_k * b / t, s_k * wave)
                for f_k, s_k in st.kernels_norc:
                    work += 3.0 * max(f_k * b / t, s_k * wave)
                comp = work / (peak * gcal.eta_max)
                flops -= (passes * st.occ_flops_rc + 3.0 * st.occ_flops_norc) * b / t
            if flops > 0:
                work_gflop = flops / 1e9 / work_scale
                if per_layer_work:
                    work_gflop /= max(1, st.layers)
                comp += flops / (peak * gcal.efficiency(work_gflop))
            if traffic:
                comp += traffic * passes / 3.0 * (st.act_fixed + st.act_tp / t) * b / hbm
            intra = 0.0
            if t > 1 and st.tp_count:
                n_ar = (2.0 + (1.0 if rc else 0.0)) * st.tp_count
                vol = (2.0 + (1.0 if rc else 0.0)) * st.tp_elems * b * nbytes
                intra += n_ar * lat + vol * 2 * (t - 1) / t / bw_intra
            if q > 1 and st.a2a_count:
                n_a2a = (2.0 + (1.0 if rc else 0.0)) * st.a2a_count
                vol = (2.0 + (1.0 if rc else 0.0)) * st.a2a_elems * (b / t) * nbytes * (q - 1) / q
                bw = bw_intra if stage_in_node else bw_node / gpus_of_stage_per_node
                intra += n_a2a * lat + vol / bw
            cross = 0.0
            if i < p - 1:
                total = 2.0 * st.out_elems * b * d * nbytes  # activation forward + gradient back
                if stage_in_node and ((i + 1) * q) % g:
                    cross = 2 * lat + total / q / bw_intra
                else:
                    cross = 2 * lat + total / (nodes_per_stage * bw_node)
                cross *= v
            local_params = st.params / t
            bw_dp = bw_intra if stage_in_node else bw_node / gpus_of_stage_per_node
            mb_sync = 0.0
            if d > 1 and st.mb_sync_params:  # all-reduced after every microbatch
                size = st.mb_sync_params / t * grad_bytes
                mb_sync = 2 * lat * (d - 1) + 2 * (d - 1) / d * size / bw_dp
            times.append(comp + intra + cross + mb_sync)
            comps.append(comp)
            intras.append(intra)
            crosses.append(cross)
            mb_syncs.append(mb_sync)

            sync = 0.0
            if d > 1:  # the other gradients, once per iteration
                size = (st.params - st.mb_sync_params) / t * grad_bytes
                sync = 2 * lat * (d - 1) + 2 * (d - 1) / d * size / bw_dp
                sync *= 1.0 - fw.dp_overlap
            shard = d if plan.distributed_optimizer else 1
            opt_params = local_params / shard + st.expert_params / q
            opt = opt_params * opt_step / hbm
            if sync + opt > sync_opt:
                sync_opt, sync_part, opt_part = sync + opt, sync, opt

            states = (
                local_params * (nbytes + grad_bytes)
                + local_params * opt_bytes / shard
                + st.expert_params / q * (nbytes + grad_bytes + opt_bytes)
            )
            inflight = float(min(m, p - i))
            if v > 1:
                inflight *= 1 + (p - 1) / (p * v)
            acts = stored_activation_bytes(st, t, plan.recompute, plan.sequence_parallel) * b
            acts *= inflight
            if rc:  # one cluster's activations while it is re-run
                sp = t if plan.sequence_parallel else 1
                acts += b * max((fx / sp + tp / t for fx, tp in st.clusters_ws), default=0.0)
            mem_max = max(mem_max, states + acts)

        if fw.cross_stage_overlap or p == 1:
            t_max = max(times)
            j = times.index(t_max)
            bubble = (sum(times) - t_max) / v
            cross_part = m * crosses[j]
            t_max -= crosses[j]
        else:
            # Transfers do not overlap compute: each pipeline tick first moves the stages'
            # inputs, then computes, so the transfers form a pipeline of their own.
            inner = [x - y for x, y in zip(times, crosses, strict=True)]
            t_max = max(inner)
            j = inner.index(t_max)
            x_max = max(crosses)
            bubble = (sum(inner) - t_max + sum(crosses) - x_max) / v
            cross_part = m * x_max
        overhead = cal.iteration_overhead_s
        total_time = m * t_max + cross_part + bubble + sync_opt + overhead
        breakdown = Breakdown(
            compute_s=m * comps[j],
            intra_stage_comm_s=m * intras[j],
            cross_stage_comm_s=cross_part,
            bubble_s=bubble,
            grad_sync_s=m * mb_syncs[j] + sync_part,
            optimizer_s=opt_part,
            overhead_s=overhead,
        )
        memory_gb = mem_max / 1e9 + fw.memory_overhead_gb
        return PlanEstimate(
            plan=plan,
            iter_time_s=total_time,
            memory_gb=memory_gb,
            memory_limit_gb=gpu.memory_gb * fw.usable_memory_fraction,
            breakdown=breakdown,
        )

    # ------------------------------------------------------------------ Cell search
    def best_plan(
        self, model: ModelSpec, global_batch: int, group: NodeGroup, cell: Cell
    ) -> tuple[PlanEstimate | None, int]:
        """Find the fastest memory-feasible plan of a Cell.

        Returns:
            (best estimate or None when no plan fits, number of plans priced).
        """
        chains = self._plan_chains(
            model, global_batch, cell.layout, cell.stages, group.gpus_per_node, None, prune=True
        )
        return self._fastest(model, global_batch, group, cell.layout, (c.plans() for c in chains))

    def _fastest(
        self,
        model: ModelSpec,
        global_batch: int,
        group: NodeGroup,
        layout: Layout,
        chains: Iterable[Iterable[Plan]],
    ) -> tuple[PlanEstimate | None, int]:
        """The fastest memory-feasible plan of ``chains`` and how many plans were priced.

        ``chains``: each a chain's plans in time order (:meth:`_plan_chains`), priced up to
        the first feasible one, its fastest; ties keep the plan met first.
        """
        best: PlanEstimate | None = None
        count = 0
        for chain in chains:
            for plan in chain:
                est = self.estimate(model, global_batch, group, layout, plan)
                count += 1
                if est is None:
                    break  # the model cannot be cut into these stages
                if not est.feasible:
                    continue
                if best is None or est.iter_time_s < best.iter_time_s:
                    best = est
                break
        return best, count

    def cell_estimate(
        self, model: ModelSpec, global_batch: int, group: NodeGroup, cell: Cell
    ) -> CellEstimate | None:
        """The Cell priced at its best plan, or None when nothing fits."""
        best, count = self.best_plan(model, global_batch, group, cell)
        if best is None:
            return None
        return CellEstimate(cell=cell, global_batch=global_batch, best=best, plans_evaluated=count)

    def search(
        self,
        model: ModelSpec,
        global_batch: int,
        group: NodeGroup,
        layout: Layout,
        constraints: PlanConstraints | None = None,
    ) -> tuple[PlanEstimate | None, int]:
        """Best memory-feasible plan on a layout over every stage count (or the constrained one).

        Stage counts are powers of two up to the layout's GPU count, as in Crius; a constraint
        may fix any other count (Megatron-LM runs 35 stages).

        Returns:
            (best estimate or None when no plan fits, number of plans priced).
        """
        cons = constraints or PlanConstraints()
        if cons.pipeline is not None:
            stage_options = [cons.pipeline]
        else:
            stage_options = [
                1 << k for k in range(layout.num_gpus.bit_length()) if (1 << k) <= layout.num_gpus
            ]
        chains = (
            [plan for plan in chain.plans() if cons.admits(plan, global_batch)]
            for stages in stage_options
            for chain in self._plan_chains(
                model, global_batch, layout, stages, group.gpus_per_node, cons, prune=True
            )
        )
        return self._fastest(model, global_batch, group, layout, chains)
