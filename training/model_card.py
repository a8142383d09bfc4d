"""`python -m training.model_card`: write an exported model's MODEL_CARD.md from the files commands wrote."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import engine
from training.shapes import shape_by_name

DEFAULT_MODEL = Path(engine.__file__).parent / "default"  # the bundled model
LANGUAGE_NAMES = {"python": "Python", "typescript": "TypeScript", "lua": "Lua", "javascript": "JavaScript"}


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def objective(config: dict) -> str:
    """What the steps optimized, read from the run's config (older runs lack the newer fields)."""
    canvas_from = config.get("canvas_from_tokens", 0)
    ramp = config.get("canvas_ramp_tokens", 0)
    weight = config.get("canvas_weight", 1.0)
    phases = (
        f"next-token loss only for the first {canvas_from:,} tokens (an AR-first curriculum: the encoder "
        f"read every position causally, the decoder did not run), then the canvas loss ramped in over "
        f"{ramp:,} tokens to weight {weight}"
        if canvas_from
        else f"the canvas loss (weight {weight}) from the start"
    )
    drafts = config.get("draft_share", 0.0)
    draft_part = (
        f"; {drafts:.0%} of first canvases started from the server's own lookup draft on the file (right, "
        "partly right or wrong), so the model learned when to keep one"
        if drafts
        else ""
    )
    scaled = (
        ", on temperature-scaled logits as the sampler feeds them"
        if config.get("self_conditioning_scaled")
        else ""
    )
    return (
        f"- Objective: {phases}, beside a next-token loss on the encoder (weight {config['ar_weight']}). "
        "The canvas loss: uniform-state block diffusion on fill-in-the-middle spans shaped like editor "
        "completions (rest of a line, whole lines, a block body, inside brackets, random spans), "
        f"noise rate U({config['min_noise']}, 1), loss on every canvas position, self-conditioning on "
        f"{config['self_conditioning_rate']:.0%} of steps{scaled}{draft_part}."
    )


def training_section(training: dict) -> str:
    config = training["config"]
    shape = shape_by_name(config["shape"])
    hours = training["seconds"] / 3600
    cpu = training.get("cpu_seconds")
    compute = f"{hours:.2f} hours" + (f" ({cpu / 3600:.2f} CPU hours)" if cpu else "")
    precision = "bf16 autocast, fp32 master weights" if config.get("bf16") else "fp32"
    optimizer = (
        "Muon on the hidden matrices (experts too), AdamW on the embedding, norms and router"
        if config.get("optimizer") == "muon"
        else "AdamW"
    )
    return "\n".join(
        [
            "## Training",
            "",
            f"- Architecture: `DiffusionGemmaForBlockDiffusion`, shape `{config['shape']}`: "
            f"{shape.num_layers} layers, hidden {shape.hidden_size}, {shape.num_experts} experts "
            f"(top {shape.top_k_experts}), vocabulary {shape.vocab_size}, canvas {shape.canvas_length}.",
            f"- Steps: {training['step']:,}; tokens read by the encoder: {training['tokens']:,}; "
            f"canvas tokens denoised: {training['canvas_tokens']:,}.",
            f"- Compute: {compute} on a 2-core x86-64 CPU shared with other work, {precision}.",
            objective(config),
            f"- Batch {config['batch_size']}, prompt budgets {config['prompt_budgets']} tokens, canvas "
            f"lengths {config['canvas_lengths']}, {optimizer}, lr {config['lr']}; {_schedule(training)}",
            "- Prompt layout: `<|lang|> <|fim_suffix|> suffix <|fim_prefix|> prefix <|fim_middle|>`, "
            "then the canvas: typing only changes the end of the prompt, so its KV cache is reused.",
        ]
    )


def _schedule(training: dict) -> str:
    """What the learning rate did and which weights ship: the card must not guess either."""
    cooldown = training.get("cooldown")
    text = (
        f"constant lr after warmup, then decayed linearly to a tenth over the last {cooldown['steps']:,} "
        f"steps (a cooldown branch from step {cooldown['from']:,})"
        if cooldown
        else "constant lr after warmup"
    )
    weights = "raw" if training.get("weights") == "raw" else "EMA"
    return f"{text}; the shipped weights are the {weights} weights."


def data_section(manifest: dict, languages: list[str]) -> str:
    lines = [
        "## Data",
        "",
        "Permissively licensed code available offline (`python -m training.corpus build`, see",
        "`training/corpus/README.md`), deduplicated and decontaminated against the benchmarks below.",
        "",
        "| language | files | MB | licenses (MB) |",
        "| --- | --- | --- | --- |",
    ]
    for language in languages:
        entry = manifest["languages"][language]
        licenses = sorted(entry["licenses"].items(), key=lambda kv: kv[1]["bytes"], reverse=True)[:6]
        shown = ", ".join(f"{name} {info['bytes'] / 1e6:.0f}" for name, info in licenses)
        files, size = entry["files"]["train"], entry["bytes"]["train"] / 1e6
        lines.append(f"| {language} | {files:,} | {size:.0f} | {shown} |")
    return "\n".join(lines)


def _row(name: str, s: dict) -> str:
    cells = [
        name,
        s["decoder"],
        str(s["n"]),
        _percent(s["exact_match"]),
        _number(s["edit_similarity"]),
        _percent(s.get("offered")),
        _percent(s.get("precision")),
        _percent(s["pass_at_1"]),
        _number(s["tokens_per_forward"]),
        _number(s["p50_ms"], 0),
        _number(s["p95_ms"], 0),
    ]
    return "| " + " | ".join(cells) + " |"


def eval_section(runs: list[dict], paths: list[str]) -> str:
    lines = [
        "## Evaluation",
        "",
        "Every figure comes from the server's own pipeline (`dgemma-lsp eval`: context, drafts, latency "
        "budget, repair, post-processing); `copy` is the no-model baseline (what followed the longest "
        "earlier match of the text before the cursor). Offered: rows where the editor showed something; "
        "precise: the share of those within edit similarity 0.7 of the truth.",
        "",
        "| benchmark | decoder | rows | exact | edit sim. | offered | precise | pass@1 | tokens/forward "
        "| p50 ms | p95 ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    speeds, commands = [], []
    for run, path in zip(runs, paths, strict=True):
        name = run["benchmark"] + (f" ({run['language']})" if run.get("language") else "")
        lines += [_row(name, summary) for summary in run["summaries"]]
        speed = run.get("speed") or {}
        if speed.get("ratio") is not None:
            speeds.append(
                f"- {name}: diffusion {speed['diffusion_tokens_per_s']:.1f} tokens/s, autoregressive "
                f"{speed['autoregressive_tokens_per_s']:.1f} ({speed['rows']} rows with "
                f"{speed.get('min_tokens', 16)}-{speed.get('max_tokens', 64)} token "
                f"completions): {speed['ratio']:.2f}x"
                + (
                    f"; after the prompt's prefill: {speed['decode_ratio']:.2f}x"
                    if speed.get("decode_ratio") is not None
                    else ""
                )
            )
        commands.append(
            f"- `{run.get('command', 'dgemma-lsp eval ' + run['benchmark'])}` -> `{Path(path).name}`"
        )
    speed_part = ["", "Same weights decoded both ways in one run, wall time per completion token:", *speeds]
    return "\n".join([*lines, *(speed_part if speeds else []), "", "Produced by:", *commands])


def _names(languages: list[str]) -> str:
    """Display names joined for prose: python, typescript, lua -> "Python, TypeScript and Lua"."""
    names = [LANGUAGE_NAMES.get(language, language) for language in languages]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def card(model: Path, manifest: dict, runs: list[dict], paths: list[str], languages: list[str]) -> str:
    training = json.loads((model / "training.json").read_text())
    generation = json.loads((model / "generation_config.json").read_text())
    sampling = (
        "## Sampling defaults (generation_config.json)\n\n"
        f"At most {generation['max_denoising_steps']} denoising steps per canvas, entropy bound "
        f"{generation['sampler_config']['entropy_bound']}, temperature {generation['t_max']} to "
        f"{generation['t_min']}, early stop when stable and mean entropy "
        f"< {generation['confidence_threshold']}."
    )
    limits = (
        f"## Limits\n\nTrained on {_names(languages)} only so far: other languages get the habits of "
        "these. Its completions need review like anyone's. Card written by `python -m training.model_card` "
        "from the files above."
    )
    intro = (
        "A small DiffusionGemma-architecture code model trained by the dgemma-lsp project, so that the "
        "server completes code on any laptop CPU, offline. It is early in its training: read the scores "
        "below before relying on it; `--model` takes any DiffusionGemma checkpoint instead."
    )
    sections = [
        "# dgemma-lsp default model",
        intro,
        training_section(training),
        data_section(manifest, languages),
        eval_section(runs, paths),
        sampling,
        limits,
    ]
    return "\n\n".join(sections) + "\n"


def curve_section(model: Path, validation: list[dict]) -> str:
    """The validation losses against tokens and CPU hours, drawn to training-curve.png beside the card."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tokens = [row["tokens"] / 1e6 for row in validation]
    hours = [row.get("cpu_seconds", row["seconds"]) / 3600 for row in validation]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
    handles = []
    for ax, x, label in ((axes[0], tokens, "training tokens (millions)"), (axes[1], hours, "CPU hours")):
        handles = [
            *ax.plot(x, [row["ar"] for row in validation], marker=".", label="next-token (AR) loss"),
            *ax.plot(x, [row["canvas"] for row in validation], marker=".", label="canvas (diffusion) loss"),
        ]
        ax.set(xlabel=label, ylabel="validation loss, nats/token")
        ax.grid(alpha=0.3)
        checked = [(x_i, row) for x_i, row in zip(x, validation, strict=True) if "completion_es" in row]
        if checked:  # what users get, where the run measured it (`--completion-rows`)
            right = ax.twinx()
            handles += right.plot(
                [x_i for x_i, _ in checked], [row["completion_es"] for _, row in checked],
                marker="s", color="tab:green", label="model alone: edit similarity (right axis)",
            )  # fmt: skip
            by_head = [(x_i, row) for x_i, row in checked if "completion_ar_es" in row]
            if by_head:
                handles += right.plot(
                    [x_i for x_i, _ in by_head], [row["completion_ar_es"] for _, row in by_head],
                    marker="^", color="tab:olive", label="its next-token head alone (right axis)",
                )  # fmt: skip
            right.set(ylabel="edit similarity, held-out positions", ylim=(0, None))
    axes[0].legend(handles=handles, fontsize="small")
    fig.suptitle("Validation loss on held-out Python (fixed batches, the corpus' valid split)")
    fig.savefig(model / "training-curve.png", dpi=100)
    plt.close(fig)
    last = validation[-1]
    completions = ""
    if "completion_es" in last:
        completions = (
            f" The model alone on the first {last['completion_rows']} held-out calibration positions "
            f"(the server's pipeline, no drafts, no gates, no deadline): EM {last['completion_em']:.3f}, "
            f"ES {last['completion_es']:.3f}."
        )
        if "completion_ar_es" in last:
            completions += (
                f" Its next-token head alone, left to right: EM {last['completion_ar_em']:.3f}, "
                f"ES {last['completion_ar_es']:.3f}."
            )
    return "\n".join(
        [
            "## Training curve",
            "",
            "![validation loss against tokens and CPU hours](training-curve.png)",
            "",
            f"Last point: {last['tokens']:,} tokens, AR loss {last['ar']:.3f}, "
            f"canvas loss {last['canvas']:.3f} "
            f"(the run's valid.jsonl; the validation batches are the same for every run).{completions}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m training.model_card", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--eval", action="append", default=[], help="a `dgemma-lsp eval --json` output")
    parser.add_argument("--languages", default="python")
    parser.add_argument("--curve", type=Path, help="the run's valid.jsonl: draw the training curve")
    parser.add_argument(
        "--changes", type=Path, help="a Markdown file: what changed from the model this one replaces, and why"
    )
    args = parser.parse_args(argv)
    manifest = json.loads((args.corpus / "MANIFEST.json").read_text())
    runs = [json.loads(Path(p).read_text()) for p in args.eval]
    text = card(args.model, manifest, runs, args.eval, args.languages.split(","))
    if args.curve:
        validation = [json.loads(line) for line in args.curve.read_text().splitlines() if line.strip()]
        head, _, tail = text.partition("\n## Data")
        text = f"{head}\n{curve_section(args.model, validation)}\n\n## Data{tail}"
    if args.changes:
        head, _, tail = text.partition("\n## Training")
        text = f"{head}\n## What changed\n\n{args.changes.read_text().strip()}\n\n## Training{tail}"
    (args.model / "MODEL_CARD.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
