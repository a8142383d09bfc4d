"""`dgemma-lsp bench typing --plot OUT.png`: per language, the pauses with a suggestion split into
taken whole, taken partly and wrong, beside the share of the code the taken ones wrote."""

from __future__ import annotations

from pathlib import Path


def plot(blocks: dict[str, dict], out: Path, title: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise SystemExit("--plot needs matplotlib: pip install 'dgemma-lsp[bench]'") from err
    names = list(blocks)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    bottom = [0.0] * len(names)
    for key, label, colour in (
        ("whole_share", "taken whole", "tab:green"),
        ("partial_share", "taken partly", "tab:olive"),
        ("wrong_share", "wrong", "tab:red"),
    ):
        values = [(blocks[n][key] or 0.0) * (blocks[n]["shown_share"] or 0.0) for n in names]
        left.bar(names, values, bottom=bottom, color=colour, label=label)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    left.set(ylabel="share of pauses", ylim=(0, 1), title="What a pause shows")
    left.legend(fontsize=8)
    written = [blocks[n]["chars_written_share"] or 0.0 for n in names]
    saved = [blocks[n]["keys_saved_share"] or 0.0 for n in names]
    xs = range(len(names))
    right.bar(
        [x - 0.2 for x in xs], written, width=0.4, color="tab:blue", label="code written by taken suggestions"
    )
    right.bar([x + 0.2 for x in xs], saved, width=0.4, color="tab:cyan", label="keystrokes saved")
    right.set_xticks(list(xs), names)
    right.set(ylim=(0, 1), title="What the taken suggestions wrote")
    right.legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.savefig(out, dpi=110)
    plt.close(fig)
