"""The bandwidth bar chart: bytes each slave receives without and with master-side filtering.
Shared by `dumpfilter experiment` and `dumpfilter simulate`."""

from __future__ import annotations

import os


def bytes_chart(rows: list[dict], path: str | os.PathLike, title: str = "Bytes sent per slave") -> None:
    """`rows`: dicts with `slave`, `bytes_all` and `bytes_sent`. Writes a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [row["slave"] for row in rows]
    everything = [row["bytes_all"] / 1e6 for row in rows]
    filtered = [row["bytes_sent"] / 1e6 for row in rows]
    x = range(len(names))
    width = 0.38
    fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(names) + 2), 4.2))
    ax.bar([i - width / 2 for i in x], everything, width, label="without master-side filtering", color="#9aa5b1")
    bars = ax.bar([i + width / 2 for i in x], filtered, width, label="with master-side filtering", color="#2f7ebc")
    for bar, row in zip(bars, rows):
        pct = 100.0 * (row["bytes_all"] - row["bytes_sent"]) / row["bytes_all"] if row["bytes_all"] else 0.0
        ax.annotate(f"-{pct:.0f}%", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(x), names, rotation=20 if len(names) > 4 else 0)
    ax.set_ylim(0, max(everything + filtered, default=0) * 1.25 or 1.0)  # headroom for the legend
    ax.set_ylabel("MB sent")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
