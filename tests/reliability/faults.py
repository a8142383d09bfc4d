"""Broken model folders, each made from the tiny test checkpoint (or, for another architecture, a
real GPT-2 checkpoint written by transformers). Nothing is mocked: the server loads these files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

# A module of this name in a checkpoint would run on import if anything honoured `auto_map`.
REMOTE_CODE = """
from pathlib import Path
Path(__file__).with_name("REMOTE_CODE_RAN").write_text("the checkpoint's own code was imported")
from transformers import DiffusionGemmaForBlockDiffusion as Remote  # noqa: E402
"""


def _copy(tiny: Path, folder: Path) -> Path:
    shutil.copytree(tiny, folder)
    return folder


def weights(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.safetensors"))


def missing_weights(tiny: Path, folder: Path) -> Path:
    _copy(tiny, folder)
    for path in weights(folder):
        path.unlink()
    return folder


def truncated_weights(tiny: Path, folder: Path) -> Path:
    _copy(tiny, folder)
    for path in weights(folder):
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    return folder


def corrupt_weights(tiny: Path, folder: Path) -> Path:
    """The safetensors header's JSON overwritten with junk of the same length."""
    _copy(tiny, folder)
    for path in weights(folder):
        data = bytearray(path.read_bytes())
        header = int.from_bytes(data[:8], "little")
        data[8 : 8 + header] = b"\x00\xff" * (header // 2) + b"\x00" * (header % 2)
        path.write_bytes(bytes(data))
    return folder


def pickle_weights(tiny: Path, folder: Path) -> Path:
    """Only a pytorch_model.bin (torch.save, i.e. pickle) where the safetensors were."""
    import torch

    _copy(tiny, folder)
    for path in weights(folder):
        path.unlink()
    torch.save({"weight": torch.zeros(2)}, folder / "pytorch_model.bin")
    return folder


def other_architecture(tiny: Path, folder: Path) -> Path:
    """A real, tiny GPT-2 checkpoint in safetensors, with the tiny model's tokenizer beside it."""
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, n_positions=32, vocab_size=512))
    model.save_pretrained(folder, safe_serialization=True)
    shutil.copy(tiny / "tokenizer.json", folder / "tokenizer.json")
    return folder


def larger_tokenizer(tiny: Path, folder: Path) -> Path:
    """The model's weights with a tokenizer of more tokens than its embedding has rows."""
    from tokenizers import Tokenizer

    _copy(tiny, folder)
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.add_tokens([f"extra_token_{i}" for i in range(1000)])
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def remote_code(tiny: Path, folder: Path) -> Path:
    """A working checkpoint whose config asks, through auto_map, for code shipped in the folder."""
    _copy(tiny, folder)
    (folder / "modeling_remote.py").write_text(REMOTE_CODE)
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "modeling_remote.Remote", "AutoConfig": "modeling_remote.Remote"}
    (folder / "config.json").write_text(json.dumps(config))
    return folder
