import csv

import pytest

from crius_gym.errors import ConfigError, UnknownNameError
from crius_gym.workload.models import build_model, load_model_catalog, normalise_model_name


def test_every_arena_model_is_in_the_catalogue(arena_model_configs):
    cat = load_model_catalog()
    with open(arena_model_configs) as fh:
        for row in csv.DictReader(fh):
            name = f"{row['model_family']}__{row['model_size']}"
            model = cat.get(name)
            assert model.family == row["model_family"]
            assert model.dtype == row["dtype"]


def test_arena_trace_name_form():
    assert normalise_model_name("wide_resnet__6.8B") == "wide_resnet-6.8b"
    assert load_model_catalog().get("bert__1.3B").hidden_size == 2048


def test_megatron_and_llama_models_exist():
    cat = load_model_catalog()
    assert cat.get("gpt-1t").num_layers == 128
    assert cat.get("llama-70b").num_kv_heads == 8
    assert cat.get("llama-7b").ffn_hidden_size == 11008


def test_unknown_model_lists_choices():
    with pytest.raises(UnknownNameError) as err:
        load_model_catalog().get("resnet-9000")
    assert "bert-1.3b" in str(err.value)


def test_build_model_validates():
    with pytest.raises(ConfigError, match="missing required"):
        build_model("x", "gpt", {"hidden_size": 64})
    with pytest.raises(ConfigError, match="divisible"):
        build_model(
            "x",
            "gpt",
            {"hidden_size": 65, "num_layers": 1, "num_heads": 2, "seq_len": 8, "vocab_size": 10},
        )
    with pytest.raises(UnknownNameError):
        build_model("x", "cnn", {})
