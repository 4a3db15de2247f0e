"""The charts of `dumpfilter simulate` and `dumpfilter experiment` (PNG, matplotlib Agg):

* `policy_chart`: per slave, one bar per skip policy, stacked as the master's events kept for
  the slave (kept bytes) plus what the skip policy adds (heartbeats, placeholders or empty
  transactions: the overhead); what a slave without master-side filtering receives is drawn once,
  as a reference line, since it is the same binlog for every slave.
* `timeline_chart`: cumulative bytes sent against the master's binlog position, one line per
  slave: where in the binlog the savings come from.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from dumpfilter.skip_policy import NAMES as SKIP_POLICIES

# One colour per skip policy (kept: solid; overhead: the same colour, hatched and lighter).
POLICY_COLORS = dict(zip(SKIP_POLICIES, ("#2f7ebc", "#e07b39", "#3a9d5d")))  # in the policies' order
_FALLBACK = ("#7b5ea7", "#b8860b", "#c0392b")
REFERENCE_COLOR = "#5f6b7a"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _color(policy: str, index: int) -> str:
    return POLICY_COLORS.get(policy, _FALLBACK[index % len(_FALLBACK)])


def saved_percent(bytes_all: int, bytes_sent: int) -> float | None:
    """The share of the bytes a slave would receive without master-side filtering that it is not
    sent: the one number the tables and the charts print (one decimal)."""
    return round(100.0 * (bytes_all - bytes_sent) / bytes_all, 2) if bytes_all else None


def saved_label(bytes_all: int, bytes_sent: int) -> str:
    percent = saved_percent(bytes_all, bytes_sent)
    return "" if percent is None else f"{-percent:+.1f}%"


def policy_chart(slaves: Sequence[dict], path: str | os.PathLike, *, title: str) -> list[dict]:
    """`slaves`: dicts with `slave`, `bytes_all` (what it would get without master-side filtering)
    and `bars`: a list of {`policy`, `sent`, `overhead`, `own`} (own: the slave's configured
    policy): each bar is the bytes sent, stacked as the skip policy's own events (overhead) over
    the rest (the kept events, with the framing a policy keeps of a skipped transaction). Returns
    what was drawn, per bar: slave, policy, height in bytes and the label over it."""
    from matplotlib.patches import Patch

    plt = _pyplot()
    policies = list(dict.fromkeys(bar["policy"] for s in slaves for bar in s["bars"]))
    most = max((len(s["bars"]) for s in slaves), default=1)
    width = 0.8 / max(most, 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.7 * len(slaves) + 2.5), 4.8))
    top = 0.0
    drawn = []
    for i, slave in enumerate(slaves):
        bars = slave["bars"]
        start = i - width * (len(bars) - 1) / 2
        for j, bar in enumerate(bars):
            x = start + j * width
            color = _color(bar["policy"], policies.index(bar["policy"]))
            kept, overhead = (bar["sent"] - bar["overhead"]) / 1e6, bar["overhead"] / 1e6
            ax.bar(x, kept, width * 0.92, color=color, edgecolor="white" if not bar.get("own") else "black",
                   linewidth=1.2 if bar.get("own") else 0.5)
            ax.bar(x, overhead, width * 0.92, bottom=kept, color=color, alpha=0.45, hatch="///",
                   edgecolor="white", linewidth=0.5)
            total = kept + overhead
            top = max(top, total)
            label = saved_label(slave.get("bytes_all") or 0, bar["sent"])
            if label:
                ax.annotate(label, (x, total), ha="center", va="bottom", fontsize=7)
            drawn.append({"slave": slave["slave"], "policy": bar["policy"], "bytes": round(total * 1e6),
                          "label": label})
    everything = [s["bytes_all"] / 1e6 for s in slaves if s.get("bytes_all")]
    if everything and max(everything) - min(everything) <= 1e-6 * max(everything):
        # The same binlog for every slave: one reference line, not one grey bar per slave.
        ax.axhline(everything[0], color=REFERENCE_COLOR, linestyle="--", linewidth=1.2)
        ax.annotate(f"without master-side filtering: {everything[0]:.2f} MB", (len(slaves) - 0.5, everything[0]),
                    ha="right", va="bottom", fontsize=8, color=REFERENCE_COLOR)
        top = max(top, everything[0])
    else:  # slaves that would receive different amounts: a short reference mark over each group
        for i, slave in enumerate(slaves):
            if slave.get("bytes_all"):
                ax.hlines(slave["bytes_all"] / 1e6, i - 0.45, i + 0.45, colors=REFERENCE_COLOR, linestyles="--")
                top = max(top, slave["bytes_all"] / 1e6)
    ax.set_xticks(range(len(slaves)), [s["slave"] for s in slaves], rotation=15 if len(slaves) > 4 else 0)
    ax.set_xlim(-0.6, len(slaves) - 0.4)
    ax.set_ylim(0, top * 1.22 or 1.0)
    ax.set_ylabel("MB sent to the slave")
    ax.set_title(title, fontsize=10)
    handles = [Patch(color=_color(p, k), label=p) for k, p in enumerate(policies)]
    handles += [Patch(facecolor="#bbbbbb", edgecolor="black", label="kept events (outlined: the slave's own policy)"),
                Patch(facecolor="#dddddd", hatch="///", edgecolor="white", label="skip-policy overhead")]
    ax.legend(handles=handles, fontsize=7, loc="upper left", ncol=2, framealpha=0.9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return drawn


def timeline_chart(series: Sequence[dict], path: str | os.PathLike, *, title: str,
                   reference: Sequence[tuple[int, int]] | None = None) -> None:
    """`series`: dicts with `slave` and `points`, [(binlog position in bytes over the whole series,
    cumulative bytes sent)]; `reference`: the same for a slave without master-side filtering."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.0, 4.8))
    if reference:
        xs, ys = zip(*[(0, 0), *reference])
        ax.plot([x / 1e6 for x in xs], [y / 1e6 for y in ys], color=REFERENCE_COLOR, linestyle="--", linewidth=1.2,
                 label="without master-side filtering")
    for item in series:
        points = item["points"]
        if not points:
            continue
        xs, ys = zip(*[(0, 0), *points])
        ax.plot([x / 1e6 for x in xs], [y / 1e6 for y in ys], linewidth=1.6, label=item["slave"])
    ax.set_xlabel("master binlog position (MB, over all files)")
    ax.set_ylabel("cumulative MB sent to the slave")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=10)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
