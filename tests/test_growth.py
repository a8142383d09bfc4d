"""Growing a snapshot deeper: the grown model computes what the snapshot did, then trains on from it."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from engine.tokenizer import load_tokenizer
from training.checkpoint import new_model
from training.cli import main
from training.config import TrainConfig
from training.growth import ADDED_GATE, added_layers, grow_layers, layer_count, source_layers
from training.run_state import parameters
from training.shapes import shape_by_name
from training.trainer import build_optimizer, lr_scale

from .test_train import corpus


def test_new_layers_spread_evenly_and_every_old_layer_stays():
    assert source_layers(4, 6) == [0, 0, 1, 2, 2, 3]
    assert source_layers(2, 3) == [0, 0, 1]
    assert source_layers(4, 4) == [0, 1, 2, 3]
    with pytest.raises(ValueError):
        source_layers(4, 3)
    assert added_layers(4, 6) == (1, 4)
    assert added_layers(2, 3) == (1,)
    assert added_layers(4, 4) == ()


def test_added_layers_and_their_gates_learn_at_their_own_rates(tiny_model_dir):
    tokenizer = load_tokenizer(tiny_model_dir / "tokenizer.json")
    model = new_model(shape_by_name("tiny-l3"), tokenizer, seed=1)
    names = {id(p): n for n, p in model.named_parameters()}
    added = "model.encoder.language_model.layers.1."
    gates = [added + "post_attention_layernorm.weight", added + "post_feedforward_layernorm.weight"]
    for optimizer_name in ("adamw", "muon"):
        cfg = TrainConfig(
            shape="tiny-l3",
            optimizer=optimizer_name,
            added_layers=(1,),
            added_lr_scale=8,
            added_gate_lr_scale=30,
        )
        groups = build_optimizer(model, cfg).param_groups
        by_scale: dict[float, list[str]] = {}
        for group in groups:
            by_scale.setdefault(lr_scale(cfg, group), []).extend(names[id(p)] for p in group["params"])
        assert sorted(by_scale[30]) == gates
        assert by_scale[8] and all(n.startswith(added) and n not in gates for n in by_scale[8])
        assert not any(n.startswith(added) for n in by_scale[1.0])
        assert sum(map(len, by_scale.values())) == len(list(model.parameters()))
        assert all(g["weight_decay"] == 0.0 for g in groups if any(p.dim() < 2 for p in g["params"]))
    plain = build_optimizer(model, TrainConfig(shape="tiny-l3")).param_groups
    assert all("added" not in g for g in plain)


def test_a_grown_model_computes_what_the_snapshot_did_and_its_new_layers_open(tiny_model_dir):
    tokenizer = load_tokenizer(tiny_model_dir / "tokenizer.json")
    small = new_model(shape_by_name("tiny"), tokenizer, seed=1).eval()
    weights = {k: v.float() for k, v in parameters(small).items()}
    for key, value in weights.items():  # trained post-norms are not ones: the copies must carry them
        if "layernorm" in key:
            value.uniform_(0.5, 1.5)
    small.load_state_dict(weights, strict=False)
    added, source = "model.encoder.language_model.layers.1.", "model.encoder.language_model.layers.0."
    opened = grow_layers(weights, 3)  # the default: nearly silent, so that training opens it
    gate = "post_feedforward_layernorm.weight"
    assert torch.allclose(opened[added + gate], ADDED_GATE * weights[source + gate])
    assert torch.equal(opened[source + gate], weights[source + gate])
    grown_weights = grow_layers(weights, 3, gate=0.0)  # closed: exactly the snapshot's function
    assert layer_count(grown_weights) == 3
    deep = new_model(shape_by_name("tiny-l3"), tokenizer, seed=2).eval()
    deep.load_state_dict(grown_weights, strict=False)
    assert not grown_weights[added + "post_attention_layernorm.weight"].any()
    assert torch.equal(
        grown_weights[added + "self_attn.q_proj.weight"], weights[source + "self_attn.q_proj.weight"]
    )
    ids = torch.randint(5, 500, (2, 24))
    with torch.no_grad():
        before = small.model.encoder.language_model(input_ids=ids).last_hidden_state
        after = deep.model.encoder.language_model(input_ids=ids).last_hidden_state
    assert torch.allclose(before, after, atol=1e-6)


def test_a_run_from_an_exported_model_grows_deeper_and_no_other_way(tmp_path):
    data, run = corpus(tmp_path / "corpus"), tmp_path / "run"
    main(["tokenizer", "--corpus", str(data), "--run", str(run), "--vocab-size", "512", "--sample-mb", "1"])
    common = ["--corpus", str(data), "--batch-size", "2", "--threads", "1"]
    main(["run", "--run", str(run), *common, "--shape", "tiny", "--steps", "2"])
    packed = tmp_path / "shipped"
    main(["export", "--run", str(run), "--out", str(packed)])
    tokens = json.loads((packed / "training.json").read_text())["tokens"]

    deeper = tmp_path / "deeper"
    main(
        [
            "run",
            "--run",
            str(deeper),
            *common,
            "--shape",
            "tiny-l3",
            "--from-model",
            str(packed),
            "--steps",
            "3",
            "--set",
            "added_gate_lr_scale=20",
        ]
    )
    config = json.loads((deeper / "config.json").read_text())
    assert config["shape"] == "tiny-l3"
    assert config["added_layers"] == [1] and config["added_gate_lr_scale"] == 20
    assert layer_count(load_file(deeper / "state" / "model.safetensors")) == 3
    progress = json.loads((deeper / "state" / "progress.json").read_text())
    assert progress["step"] == 5 and progress["tokens"] > tokens  # the count goes on from the model's
    # Resumed with its added groups, whose rates `--set` may still change
    main(["run", "--run", str(deeper), *common, "--steps", "1", "--set", "added_gate_lr_scale=40"])
    assert json.loads((deeper / "state" / "progress.json").read_text())["step"] == 6
    assert json.loads((deeper / "config.json").read_text())["added_gate_lr_scale"] == 40
    main(["export", "--run", str(deeper), "--out", str(tmp_path / "export")])
    assert (
        json.loads((tmp_path / "export" / "config.json").read_text())["text_config"]["num_hidden_layers"] == 3
    )

    with pytest.raises(SystemExit, match="can only grow deeper"):
        main(
            [
                "run",
                "--run",
                str(tmp_path / "wider"),
                *common,
                "--shape",
                "small",
                "--from-model",
                str(packed),
            ]
        )
