"""Per-layer costs of a model: FLOPs, parameters, activations and communication volumes.

Each model becomes a sequence of :class:`LayerCost` records, all **per sample** and for the
**forward** pass.  The estimator scales them by the microbatch and the plan; it never looks at the
model family again (except for a per-family efficiency factor), so adding a model family means
adding one builder here.

Formulas (``docs/estimator.md``, "What is priced"):

* transformer layer forward FLOPs ``24·s·h² + 4·s²·h`` for a 4h FFN (Megatron-LM §5.1), logits
  ``2·s·h·V``; parameters ``12·h² + 13·h`` per layer plus ``(V + s)·h`` embeddings (Megatron Eq. 2);
* activation bytes per layer, 16-bit, tensor-parallel degree t:
  ``s·h·(10 + 24/t + 5·a·s/(h·t))`` (Korthikanti et al. 2022, Table 2);
* MoE (GShard as in the Arena artifact): attention plus top-k of E experts of FFN ``8h`` in every
  other layer, dispatch/combine einsums ``8·S·h`` FLOPs per token, two all-to-alls per MoE layer;
* Wide-ResNet (Alpa's bottleneck block): ``2·H·W·C_in·C_out·k²`` FLOPs per convolution; each
  convolution (and the classifier GEMM) is also listed as a kernel (its FLOPs and the
  ``2·C_in·k²`` FLOPs of one output element) for the estimator's occupancy floor.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

from crius_gym.workload.models import (
    DTYPE_BYTES,
    ModelSpec,
    MoESpec,
    TransformerSpec,
    WideResNetSpec,
)

LayerKind = Literal["embed", "gemm", "conv", "head"]


@dataclass(frozen=True)
class LayerCost:
    """Costs of one layer for one sample, forward pass.

    Attributes:
        name: label, e.g. ``layer3`` or ``stage2.block1``.
        kind: ``embed``, ``gemm``, ``conv`` or ``head``.
        flops: forward FLOPs per sample.
        params: dense parameters (replicated over data parallelism, split by tensor parallelism).
        expert_params: expert parameters (split over every GPU of the stage: expert parallelism).
        out_elems: elements of the layer's output per sample (pipeline payload, checkpoint size).
        act_fixed_bytes: activation bytes kept for backward per sample that tensor parallelism
            does not split.
        act_tp_bytes: activation bytes kept for backward per sample that tensor parallelism
            splits.
        tp_allreduce_elems: elements per sample of each tensor-parallel all-reduce.
        tp_allreduces: tensor-parallel all-reduces in the forward pass.
        a2a_elems: elements per sample of each all-to-all (MoE dispatch/combine).
        a2a_count: all-to-alls in the forward pass.
        recomputed: re-run in the backward pass under activation recomputation.
        core_flops: forward FLOPs per sample of the attention core (QKᵀ and attention over V),
            what selective recomputation re-runs.
        core_act_bytes: activation bytes per sample of the attention core (softmax output, its
            dropout mask and output: 5·a·s² in 16-bit), what selective recomputation does not
            keep; part of ``act_tp_bytes``.
        kernels: the layer's kernels as (forward FLOPs per sample, FLOPs of one output
            element: ``2·C_in·k²`` for a convolution, ``2·K`` for a GEMM of depth K). A layer
            that lists them is priced kernel by kernel with the occupancy floor of
            ``docs/estimator.md`` ("Convolutions"); their FLOPs sum to ``flops``.
    """

    name: str
    kind: LayerKind
    flops: float
    params: float
    out_elems: float
    act_fixed_bytes: float = 0.0
    act_tp_bytes: float = 0.0
    expert_params: float = 0.0
    tp_allreduce_elems: float = 0.0
    tp_allreduces: int = 0
    a2a_elems: float = 0.0
    a2a_count: int = 0
    recomputed: bool = True
    core_flops: float = 0.0
    core_act_bytes: float = 0.0
    kernels: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class ModelCosts:
    """A model's layers and precision.

    Attributes:
        model: the architecture record.
        layers: per-layer costs in execution order.
        dtype_bytes: bytes per weight / activation element.
    """

    model: ModelSpec
    layers: tuple[LayerCost, ...]
    dtype_bytes: int

    @property
    def params(self) -> float:
        """Total parameters (dense + experts)."""
        return sum(x.params + x.expert_params for x in self.layers)

    @property
    def forward_flops_per_sample(self) -> float:
        """Forward FLOPs of one sample."""
        return sum(x.flops for x in self.layers)

    def training_flops(self, global_batch: int, recompute: bool) -> float:
        """FLOPs of one training iteration (backward = 2× forward; recomputation adds a forward)."""
        total = 0.0
        for x in self.layers:
            passes = 4.0 if (recompute and x.recomputed) else 3.0
            total += passes * x.flops
        return total * global_batch


def _transformer_layer(
    name: str,
    s: int,
    h: int,
    a: int,
    ffn: int,
    gated: bool,
    kv_heads: int,
    bias: bool,
    nbytes: int,
    *,
    expert_count: int = 0,
    top_k: int = 1,
    group: int = 0,
) -> LayerCost:
    """One transformer layer; with ``expert_count`` > 0 its FFN is a top-k mixture of experts."""
    h_kv = h * kv_heads // a
    attn_params = 2 * h * h + 2 * h * h_kv + (4 * h if bias else 0)
    ffn_mats = 3 if gated else 2
    ffn_params = ffn_mats * h * ffn + ((ffn + h) if bias else 0)
    norm_params = 4 * h
    core_flops = 4 * s * s * h
    attn_flops = 2 * s * (2 * h * h + 2 * h * h_kv) + core_flops
    # Korthikanti Table 2 (16-bit): 10·sh not split by TP; attention 8·sh + 5·a·s² and MLP
    # 16·sh split by TP (MLP scaled by the FFN width relative to 4h).  fp32 doubles everything.
    scale = nbytes / 2
    act_fixed = 10 * s * h * scale
    core_act = 5 * a * s * s * scale
    if expert_count:
        gate_params = h * expert_count
        expert_params = expert_count * ffn_params
        ffn_flops = top_k * 2 * s * ffn_mats * h * ffn
        route_flops = 8 * s * group * h + 2 * s * h * expert_count
        act_tp = (8 * s * h + 5 * a * s * s + 16 * s * h * top_k * ffn / (4 * h)) * scale
        return LayerCost(
            name=name,
            kind="gemm",
            flops=attn_flops + ffn_flops + route_flops,
            params=attn_params + norm_params + gate_params,
            expert_params=expert_params,
            out_elems=s * h,
            act_fixed_bytes=act_fixed,
            act_tp_bytes=act_tp,
            tp_allreduce_elems=s * h,
            tp_allreduces=1,  # attention output; the expert FFN is expert-parallel, not TP
            a2a_elems=s * h * top_k,
            a2a_count=2,
            core_flops=core_flops,
            core_act_bytes=core_act,
        )
    act_tp = (8 * s * h + 5 * a * s * s + 16 * s * h * ffn / (4 * h)) * scale
    return LayerCost(
        name=name,
        kind="gemm",
        flops=attn_flops + 2 * s * ffn_mats * h * ffn,
        params=attn_params + ffn_params + norm_params,
        out_elems=s * h,
        act_fixed_bytes=act_fixed,
        act_tp_bytes=act_tp,
        tp_allreduce_elems=s * h,
        tp_allreduces=2,
        core_flops=core_flops,
        core_act_bytes=core_act,
    )


def _embedding_and_head(
    s: int, h: int, vocab: int, tied: bool, learned_positions: bool, nbytes: int
) -> tuple[LayerCost, LayerCost]:
    embed = LayerCost(
        name="embedding",
        kind="embed",
        flops=0.0,
        params=vocab * h + (s * h if learned_positions else 0),
        out_elems=s * h,
        act_fixed_bytes=s * h * nbytes,
    )
    # The logits are kept in fp32 for the loss (≈ 4·s·V bytes per sample, split by TP).
    head = LayerCost(
        name="head",
        kind="head",
        flops=2 * s * h * vocab,
        params=(0 if tied else vocab * h) + 2 * h,
        out_elems=1.0,
        act_tp_bytes=4 * s * vocab,
        recomputed=False,
    )
    return embed, head


def _transformer_costs(m: TransformerSpec) -> tuple[LayerCost, ...]:
    nbytes = DTYPE_BYTES[m.dtype]
    bias = m.family != "llama"
    embed, head = _embedding_and_head(
        m.seq_len, m.hidden_size, m.vocab_size, m.tied_embeddings, m.family != "llama", nbytes
    )
    layers = [
        _transformer_layer(
            f"layer{i}",
            m.seq_len,
            m.hidden_size,
            m.num_heads,
            m.ffn_hidden_size,
            m.gated_ffn,
            m.num_kv_heads,
            bias,
            nbytes,
        )
        for i in range(m.num_layers)
    ]
    return (embed, *layers, head)


def _moe_costs(m: MoESpec) -> tuple[LayerCost, ...]:
    nbytes = DTYPE_BYTES[m.dtype]
    ffn = m.ffn_factor * m.hidden_size
    embed, head = _embedding_and_head(
        m.seq_len, m.hidden_size, m.vocab_size, m.tied_embeddings, True, nbytes
    )
    layers = []
    for i in range(m.num_layers):
        is_moe = i % m.moe_every == 0
        layers.append(
            _transformer_layer(
                f"layer{i}",
                m.seq_len,
                m.hidden_size,
                m.num_heads,
                ffn,
                False,
                m.num_heads,
                True,
                nbytes,
                expert_count=m.num_experts if is_moe else 0,
                top_k=m.top_k,
                group=m.expert_group_size,
            )
        )
    return (embed, *layers, head)


def _conv(h_out: int, c_in: int, c_out: int, k: int) -> tuple[float, float]:
    """FLOPs per sample and parameters of one convolution (no bias; BatchNorm adds 2·c_out)."""
    return 2.0 * h_out * h_out * c_in * c_out * k * k, float(c_in * c_out * k * k + 2 * c_out)


def _wide_resnet_costs(m: WideResNetSpec) -> tuple[LayerCost, ...]:
    nbytes = DTYPE_BYTES[m.dtype]
    res = m.image_size // 2  # 7×7 stride-2 stem
    f0 = m.num_filters
    stem_flops, stem_params = _conv(res, 3, f0, 7)
    res //= 2  # 3×3 stride-2 max pool
    layers: list[LayerCost] = [
        LayerCost(
            name="stem",
            kind="conv",
            flops=stem_flops,
            params=stem_params,
            out_elems=res * res * f0,
            act_fixed_bytes=0.0,
            act_tp_bytes=3 * (2 * res) ** 2 * f0 * nbytes,
            tp_allreduce_elems=res * res * f0,
            tp_allreduces=1,
            kernels=((stem_flops, 2.0 * 3 * 7 * 7),),
        )
    ]
    c_in = f0
    for stage, blocks in enumerate(m.stage_sizes):
        f = f0 * 2**stage
        for j in range(blocks):
            stride = 2 if stage > 0 and j == 0 else 1
            res_in, res_out = res, res // stride
            fl1, p1 = _conv(res_in, c_in, f, 1)
            fl2, p2 = _conv(res_out, f, f * m.width_factor, 3)
            fl3, p3 = _conv(res_out, f * m.width_factor, 4 * f, 1)
            flops, params = fl1 + fl2 + fl3, p1 + p2 + p3
            # 1×1 (c_in → f), 3×3 (f → f·w), 1×1 (f·w → 4f): 2·C_in·k² FLOPs per output.
            kernels = [(fl1, 2.0 * c_in), (fl2, 18.0 * f), (fl3, 2.0 * f * m.width_factor)]
            if c_in != 4 * f or stride != 1:
                flp, pp = _conv(res_out, c_in, 4 * f, 1)
                flops, params = flops + flp, params + pp
                kernels.append((flp, 2.0 * c_in))  # projection shortcut
            # Each convolution's output is kept for BatchNorm and ReLU backward (≈3 copies).
            act = 3 * (res_in**2 * f + res_out**2 * f * m.width_factor + res_out**2 * 4 * f)
            layers.append(
                LayerCost(
                    name=f"stage{stage}.block{j}",
                    kind="conv",
                    flops=flops,
                    params=params,
                    out_elems=res_out * res_out * 4 * f,
                    act_fixed_bytes=res_in * res_in * c_in * nbytes,
                    act_tp_bytes=act * nbytes,
                    tp_allreduce_elems=res_out * res_out * 4 * f,
                    tp_allreduces=2,
                    kernels=tuple(kernels),
                )
            )
            c_in, res = 4 * f, res_out
    layers.append(
        LayerCost(
            name="head",
            kind="head",
            flops=2.0 * c_in * m.num_classes,
            params=float(c_in * m.num_classes + m.num_classes),
            out_elems=1.0,
            act_tp_bytes=4.0 * m.num_classes,
            recomputed=False,
            kernels=((2.0 * c_in * m.num_classes, 2.0 * c_in),),
        )
    )
    return tuple(layers)


@functools.cache
def model_costs(model: ModelSpec) -> ModelCosts:
    """Return the per-layer costs of ``model`` (cached; model records are immutable)."""
    if isinstance(model, MoESpec):
        layers = _moe_costs(model)
    elif isinstance(model, WideResNetSpec):
        layers = _wide_resnet_costs(model)
    else:
        layers = _transformer_costs(model)
    return ModelCosts(model=model, layers=layers, dtype_bytes=DTYPE_BYTES[model.dtype])


def transformer_activation_bytes_per_layer(
    seq_len: int,
    microbatch: int,
    hidden: int,
    heads: int,
    tensor_parallel: int,
    mode: Literal["none", "sequence_parallel", "selective", "full"],
) -> float:
    """Activation memory of one 16-bit transformer layer (Korthikanti et al. 2022, Table 2).

    Args:
        seq_len: s.
        microbatch: b.
        hidden: h.
        heads: a.
        tensor_parallel: t.
        mode: ``none`` (TP only), ``sequence_parallel`` (TP + SP), ``selective`` (TP + SP +
            selective recomputation) or ``full`` (full recomputation: only the input is kept).

    Returns:
        Bytes per GPU.
    """
    s, b, h, a, t = seq_len, microbatch, hidden, heads, tensor_parallel
    if mode == "none":
        return s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
    if mode == "sequence_parallel":
        return s * b * h * (34 + 5 * a * s / h) / t
    if mode == "selective":
        return 34 * s * b * h / t
    return 2.0 * s * b * h
