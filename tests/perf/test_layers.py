import pytest

from crius_gym.perf.estimator import optimizer_state_bytes
from crius_gym.perf.layers import model_costs, transformer_activation_bytes_per_layer
from crius_gym.workload.models import load_model_catalog

GIB = 2**30
TABLE1 = [
    "gpt-1.7b",
    "gpt-3.6b",
    "gpt-7.5b",
    "gpt-18.4b",
    "gpt-39.1b",
    "gpt-76.1b",
    "gpt-145.6b",
    "gpt-310.1b",
    "gpt-529.6b",
    "gpt-1t",
]


@pytest.mark.parametrize("name", TABLE1)
def test_gpt_parameters_match_megatron_eq2(name):
    m = load_model_catalog().get(name)
    h, n_l, s, v = m.hidden_size, m.num_layers, m.seq_len, m.vocab_size
    eq2 = 12 * n_l * h**2 * (1 + 13 / (12 * h) + (v + s) / (12 * n_l * h))
    # Eq. 2 leaves out the final LayerNorm (2h).
    assert model_costs(m).params == pytest.approx(eq2 + 2 * h, rel=1e-12)


@pytest.mark.parametrize("name", TABLE1)
def test_training_flops_match_megatron_eq3(name):
    m = load_model_catalog().get(name)
    h, n_l, s, v, b = m.hidden_size, m.num_layers, m.seq_len, m.vocab_size, 512
    eq3 = 96 * b * s * n_l * h**2 * (1 + s / (6 * h) + v / (16 * n_l * h))
    assert model_costs(m).training_flops(b, recompute=True) == pytest.approx(eq3, rel=1e-9)
    # Without recomputation: the "model FLOPs" 72·B·s·l·h²(1 + s/(6h) + V/(12lh)).
    eq_model = 72 * b * s * n_l * h**2 * (1 + s / (6 * h) + v / (12 * n_l * h))
    assert model_costs(m).training_flops(b, recompute=False) == pytest.approx(eq_model, rel=1e-9)


@pytest.mark.parametrize(
    ("name", "nominal"),
    [
        ("bert-760m", 0.76),
        ("bert-1.3b", 1.3),
        ("bert-2.6b", 2.6),
        ("bert-6.7b", 6.7),
        ("moe-690m", 0.69),
        ("moe-1.3b", 1.3),
        ("moe-2.4b", 2.4),
        ("moe-10b", 10),
        ("moe-27b", 27),
        ("wide_resnet-500m", 0.5),
        ("wide_resnet-1b", 1.0),
        ("wide_resnet-2b", 2.0),
        ("wide_resnet-4b", 4.0),
        ("wide_resnet-6.8b", 6.8),
        ("llama-7b", 6.74),
        ("llama-70b", 69.0),
    ],
)
def test_parameter_counts_near_nominal(name, nominal):
    params = model_costs(load_model_catalog().get(name)).params / 1e9
    # BERT's untied output head adds V·h beyond Alpa's nominal GPT sizes.
    assert params == pytest.approx(nominal, rel=0.12)


def test_korthikanti_fig1_activation_memory():
    # 22B: h=6144, a=64, l=48, TP 8, microbatch 4.
    none_22b = 48 * transformer_activation_bytes_per_layer(2048, 4, 6144, 64, 8, "none")
    sel_22b = 48 * transformer_activation_bytes_per_layer(2048, 4, 6144, 64, 8, "selective")
    assert none_22b / GIB == pytest.approx(59.25, abs=0.01)
    assert sel_22b / GIB == pytest.approx(9.56, abs=0.01)
    # 1T: h=25600, a=160, l=128, TP 8 · PP 64, microbatch 1; the first 1F1B stage holds p
    # microbatches of l/p layers, i.e. l layers' worth.
    none_1t = 128 * transformer_activation_bytes_per_layer(2048, 1, 25600, 160, 8, "none")
    sel_1t = 128 * transformer_activation_bytes_per_layer(2048, 1, 25600, 160, 8, "selective")
    assert none_1t / GIB == pytest.approx(131.25, abs=0.01)
    assert sel_1t / GIB == pytest.approx(26.56, abs=0.01)
    full = transformer_activation_bytes_per_layer(2048, 1, 25600, 160, 8, "full")
    assert full == 2 * 2048 * 25600


def test_layer_costs_agree_with_korthikanti_for_tp1():
    m = load_model_catalog().get("gpt-22b")
    layer = model_costs(m).layers[1]
    per_sample = layer.act_fixed_bytes + layer.act_tp_bytes
    assert per_sample == pytest.approx(
        transformer_activation_bytes_per_layer(2048, 1, 6144, 64, 1, "none"), rel=1e-12
    )


def test_model_states_match_korthikanti_fig1_within_10pct():
    # 22B with TP 8: 45.56 GiB of parameters + optimizer per GPU (fp16 weights, fp32 main
    # gradients, Adam with an fp32 master copy = 18 bytes/parameter).
    m = load_model_catalog().get("gpt-22b")
    per_param = 2 + 4 + optimizer_state_bytes("adamw", 2)
    assert per_param == 18
    states = model_costs(m).params / 8 * per_param
    assert states / GIB == pytest.approx(45.56, rel=0.10)


def test_wide_resnet_is_fp32_and_moe_has_experts():
    cat = load_model_catalog()
    assert model_costs(cat.get("wide_resnet-1b")).dtype_bytes == 4
    moe = model_costs(cat.get("moe-10b"))
    assert sum(x.expert_params for x in moe.layers) > 0.8 * moe.params
    assert sum(x.a2a_count for x in moe.layers) == 2 * 8  # 2 all-to-alls in each of 8 MoE layers
