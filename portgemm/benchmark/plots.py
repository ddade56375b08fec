"""PNG plots through matplotlib (the `bench` extra); without it, plot functions return
None and the caller notes that no plots were written."""
from __future__ import annotations

from pathlib import Path

from .report import case_order, index, methods_of, modes_of, speedups


def pyplot():
    """matplotlib.pyplot with a file-only backend, or None when not installed."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(plt, fig, path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def gflops_plot(records, mode, path):
    """GFLOP/s of every method per case (log scale), with the roofline."""
    plt = pyplot()
    if plt is None:
        return None
    cases = case_order(records)
    ix = index(records)
    fig, ax = plt.subplots(figsize=(max(8, 0.28 * len(cases)), 4.5))
    x = range(len(cases))
    for m in methods_of(records):
        ys = [ix[(c["case"], mode, m)]["gflops"] if (c["case"], mode, m) in ix else float("nan")
              for c in cases]
        ax.plot(x, ys, marker="o", ms=3, lw=1, label=m)
    ax.plot(x, [c["flops"] / (c["roofline_ms"] * 1e-3) / 1e9 for c in cases], "k--", lw=1,
            label="roofline")
    ax.set_yscale("log")
    ax.set_xticks(list(x), [c["case"] for c in cases], rotation=90, fontsize=6)
    ax.set_ylabel("GFLOP/s")
    ax.set_title(f"{mode}")
    ax.legend(fontsize=6, ncol=2)
    return _save(plt, fig, path)


def bars(groups, series, path, ylabel, title, hline=None, log=False):
    """Grouped bars: groups (x labels), series {label: [value per group]}."""
    plt = pyplot()
    if plt is None:
        return None
    n = max(1, len(series))
    w = 0.8 / n
    fig, ax = plt.subplots(figsize=(max(7, 0.5 * len(groups) * n ** 0.5), 4.2))
    for i, (label, ys) in enumerate(series.items()):
        ax.bar([g + i * w - 0.4 + w / 2 for g in range(len(groups))], ys, w, label=label)
    if hline is not None:
        ax.axhline(hline, color="k", lw=0.8)
    if log:
        ax.set_yscale("log")
    ax.set_xticks(range(len(groups)), groups, rotation=60, fontsize=7)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)
    return _save(plt, fig, path)


def lines(xs, series, path, xlabel, ylabel, title, logx=True, logy=False):
    plt = pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, ys in series.items():
        ax.plot(xs, ys, marker="o", label=label)
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)
    return _save(plt, fig, path)


def standard_plots(records, out_dir, prefix) -> list[Path]:
    """Per mode: GFLOP/s per case, and speed-up against each peer per case."""
    out = []
    ours = methods_of(records, "portgemm")
    peers = methods_of(records, "peer")
    for mode in modes_of(records):
        out.append(gflops_plot(records, mode, Path(out_dir) / f"{prefix}-gflops-{mode}.png"))
        if ours and peers:
            cases = [c["case"] for c in case_order(records)]
            series = {}
            for p in peers:
                d = dict(speedups(records, ours[0], p, mode))
                series[p] = [d.get(c, float("nan")) for c in cases]
            out.append(bars(cases, series, Path(out_dir) / f"{prefix}-speedup-{mode}.png",
                            f"speed-up of {ours[0]}", f"{mode}", hline=1.0, log=True))
    return [p for p in out if p is not None]
