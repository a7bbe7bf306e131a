import pytest

from crius_gym.errors import InputFileError, UnknownNameError
from crius_gym.hardware.gpus import load_gpu_catalog, parse_gpu_catalog

REQUIRED = [
    "v100-16gb",
    "v100-32gb",
    "a100-40gb",
    "a100-80gb",
    "a40",
    "a10",
    "t4",
    "l4",
    "l40s",
    "h100-sxm",
    "h200",
    "rtx3090",
]


def test_catalogue_has_required_types_with_positive_numbers():
    cat = load_gpu_catalog()
    for name in REQUIRED:
        g = cat.gpu(name)
        assert g.memory_gb > 0 and g.fp16_tflops > 0 and g.fp32_tflops > 0 and g.hbm_gbps > 0
        assert g.intra_link.scope == "intra"


@pytest.mark.parametrize(
    ("alias", "target"),
    [
        ("a100", "a100-40gb"),
        ("v100", "v100-32gb"),
        ("A40", "a40"),
        ("a10", "a10"),
        ("h100", "h100-sxm"),
    ],
)
def test_aliases_resolve_to_one_entry(alias, target):
    assert load_gpu_catalog().canonical(alias) == target


def test_every_alias_targets_a_gpu():
    cat = load_gpu_catalog()
    for alias, target in cat.aliases.items():
        assert target in cat.names, alias


def test_unknown_gpu_error_lists_choices():
    with pytest.raises(UnknownNameError) as err:
        load_gpu_catalog().gpu("k80")
    assert "k80" in str(err.value) and "a100-40gb" in str(err.value)


def test_peaks_by_dtype_and_dual_issue():
    cat = load_gpu_catalog()
    assert cat.gpu("a100").peak_flops("fp16") == pytest.approx(312e12)
    assert cat.gpu("a100").peak_flops("fp32") == pytest.approx(19.5e12)
    # A40 prints 37.4 FP32 TFLOP/s counting dual issue; kernels sustain half.
    assert cat.gpu("a40").peak_flops("fp32") == pytest.approx(18.7e12)
    assert cat.gpu("h200").fp16_tflops == cat.gpu("h100").fp16_tflops  # dense, not sparse


def test_malformed_catalogue_names_the_key():
    raw = {
        "links": {"x": {"bandwidth_gbps": 1.0, "latency_us": 1.0, "scope": "intra"}},
        "gpus": {
            "g": {
                "memory_gb": 1,
                "fp16_tflops": 1,
                "fp32_tflops": 1,
                "hbm_gbps": 1,
                "intra_link": "nope",
                "gpus_per_node": 1,
            }
        },
    }
    with pytest.raises(InputFileError) as err:
        parse_gpu_catalog(raw, "gpus.yaml")
    assert "gpus.yaml" in str(err.value) and "gpus.g.intra_link" in str(err.value)
    del raw["gpus"]["g"]["memory_gb"]
    raw["gpus"]["g"]["intra_link"] = "x"
    with pytest.raises(InputFileError, match="memory_gb"):
        parse_gpu_catalog(raw, "gpus.yaml")
