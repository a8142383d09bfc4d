"""`dgemma-lsp bench --plot OUT.png`: the typing session's latencies by mode and its denoising steps,
read at a glance."""

from __future__ import annotations

from pathlib import Path


def plot(figures: dict, out: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise SystemExit("--plot needs matplotlib: pip install 'dgemma-lsp[bench]'") from err
    latencies, steps = figures["latencies_ms"], figures["steps"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    top = max([*latencies["single_line"], *latencies["multi_line"], 1.0])
    bins = [top * i / 40 for i in range(41)]
    for mode, colour in (("single_line", "tab:blue"), ("multi_line", "tab:orange")):
        values = latencies[mode]
        block = figures[mode]
        p50, p95 = block["p50_ms"] or 0, block["p95_ms"] or 0
        label = f"{mode.replace('_', '-')} (n={len(values)}, p50 {p50:.0f} ms, p95 {p95:.0f})"
        left.hist(values, bins=bins, alpha=0.6, color=colour, label=label)
    left.set(xlabel="request to answer (ms)", ylabel="answers", title="Latency by mode")
    left.legend(fontsize=8)
    counts = dict((int(k), int(v)) for k, v in steps)
    right.bar(list(counts), list(counts.values()), width=0.8, color="tab:green")
    right.set_xlim(0, max(counts, default=8) + 1)
    right.xaxis.get_major_locator().set_params(integer=True)
    mean = figures["steps_mean"]
    right.set(
        xlabel="denoising steps per model answer",
        ylabel="answers",
        title=f"Steps (mean {mean:.1f})" if mean is not None else "Steps",
    )
    fig.suptitle(f"dgemma-lsp bench{' --quick' if figures.get('quick') else ''}: model {figures['model']}")
    fig.savefig(out, dpi=110)
    plt.close(fig)
