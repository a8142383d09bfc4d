"""The engine's KV cache keeps what transformers' DynamicCache keeps, and fused_config.json holds what
transformers resolves from a config: the two things a CPU server no longer imports transformers for."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
import torch
from transformers import DiffusionGemmaConfig, DynamicCache

from engine import fused_config
from engine.fused_config import FusedConfig
from engine.kv_cache import KVCache
from engine.loading import load_engine, text_config
from evaluation.gpu_bench import TINY_TEXT
from training.shapes import _TINY_VISION

BUNDLED = Path(__file__).parent.parent / "engine" / "default"


def released_text():
    """The text config of a tiny model of the released architecture: sliding (window 64) and full layers."""
    config = DiffusionGemmaConfig(text_config=dict(TINY_TEXT), vision_config=dict(_TINY_VISION))
    return config.get_text_config()


def test_the_cache_layers_are_the_ones_dynamic_cache_builds():
    for text in (released_text(), text_config(json.loads((BUNDLED / "config.json").read_text()))):
        theirs = DynamicCache(config=text)
        ours = KVCache(list(FusedConfig.of(text).cache_windows))
        assert len(ours.layers) == len(theirs.layers)
        for mine, their in zip(ours.layers, theirs.layers, strict=True):
            assert getattr(mine, "window", None) == getattr(their, "sliding_window", None)


@pytest.mark.parametrize("seed", range(6))
def test_updates_crops_and_repeats_keep_what_dynamic_cache_keeps(seed):
    # Random prompts, extensions, crops (some past the sliding window, which neither can roll back)
    # and batch repeats, applied to both caches: the same lengths, keys, values and errors throughout.
    text = released_text()
    theirs, ours = DynamicCache(config=text), KVCache(list(FusedConfig.of(text).cache_windows))
    rng, g = random.Random(seed), torch.Generator().manual_seed(seed)
    batch = 1
    for _ in range(12):
        action = rng.choice(["update", "update", "crop", "repeat"])
        if action == "update":
            n = rng.choice([1, 3, 17, 40])
            for index in range(len(ours.layers)):
                keys, values = torch.randn(2, batch, 2, n, 8, generator=g)
                want = theirs.update(keys, values, index)
                got = ours.update(keys, values, index)
                assert all(torch.equal(w, o) for w, o in zip(want, got, strict=True))
        elif action == "crop" and theirs.get_seq_length():  # the prompt cache crops only what it holds
            remove = -rng.randint(0, 10)
            outcomes = []
            for cache in (theirs, ours):
                try:
                    cache.crop(remove)
                    outcomes.append("cropped")
                except (RuntimeError, ValueError):
                    outcomes.append("refused")
            assert outcomes[0] == outcomes[1]
            if outcomes[0] == "refused":
                return  # the prompt cache encodes afresh after a refusal
        elif theirs.get_seq_length() and batch == 1:
            theirs.batch_repeat_interleave(2)
            ours.batch_repeat_interleave(2)
            batch = 2
        assert ours.get_seq_length() == theirs.get_seq_length()
        for mine, their in zip(ours.layers, theirs.layers, strict=True):
            if their.keys is None or not their.keys.numel():
                assert mine.keys is None or not mine.keys.numel()
                continue
            assert torch.equal(mine.keys, their.keys) and torch.equal(mine.values, their.values)


def test_a_saved_fused_config_reads_back_as_transformers_resolves_it(tmp_path):
    text = released_text()
    (tmp_path / "config.json").write_text(json.dumps({"text_config": text.to_diff_dict()}))
    fused_config.write(tmp_path, text)
    assert fused_config.read(tmp_path) == FusedConfig.of(text)


def test_the_bundled_models_fused_config_is_what_transformers_resolves_today():
    # A transformers upgrade that resolved the bundled config differently would show here first.
    text = text_config(json.loads((BUNDLED / "config.json").read_text()))
    assert fused_config.read(BUNDLED) == FusedConfig.of(text)


def test_a_fused_config_left_from_another_config_is_not_used(tmp_path, caplog):
    folder = tmp_path / "model"
    shutil.copytree(BUNDLED, folder)
    config = json.loads((folder / "config.json").read_text())
    config["text_config"]["rms_norm_eps"] = 1e-5  # the checkpoint's config changed after the export
    (folder / "config.json").write_text(json.dumps(config))
    assert fused_config.read(folder) is None
    engine = load_engine(str(folder), device="cpu")
    assert engine.backbone.text_config.rms_norm_eps == 1e-5  # read by transformers, not the stale file
    (folder / fused_config.FILE).write_text("{not json")
    assert fused_config.read(folder) is None
    assert "ignoring" in caplog.text
