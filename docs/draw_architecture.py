"""Draws docs/architecture.png (`.venv/bin/python docs/draw_architecture.py`): the layers, and one
event's way from a binlog file to a slave's relay log and a real replica."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

BOXES = {  # name: (x, y, w, h, label, colour)
    "binlog": (0.2, 8.2, 2.6, 1.0, "binlog files\n(master-bin.000001 ...)", "#e8e8e8"),
    "source": (0.2, 6.6, 2.6, 1.0, "live primary\n(--source: master/upstream/)", "#e8e8e8"),
    "core": (3.6, 8.2, 3.2, 1.0, "dumpfilter._core (core/, Rust)\nscan.rs: units, CRC, names", "#f4d6a0"),
    "segments": (3.6, 6.6, 3.2, 1.0, "master/read/segments.py\nsegments: UnitList, shared LRU", "#cfe2f3"),
    "register": (7.6, 8.2, 3.4, 1.0, "Register (gRPC)\nserve/grpc_server.py -> registry.py", "#cfe2f3"),
    "flags": (7.6, 6.6, 3.4, 1.0, "master/decide/flags.py\nflag words: 1 bit per slave", "#cfe2f3"),
    "rules": (7.6, 5.0, 3.4, 1.0, "dumpfilter/rules\nrpl_filter.cc semantics", "#d9ead3"),
    "stream": (3.6, 5.0, 3.2, 1.0, "master/stream/slave_stream.py\none Dump: runs, skip policy", "#cfe2f3"),
    "send": (3.6, 3.4, 3.2, 1.0, "_core UnitList.send (send.rs)\nbytes + heartbeats", "#f4d6a0"),
    "grpc": (0.2, 1.8, 3.0, 1.0, "Dump stream (gRPC)\nproto/dumpfilter/v1", "#cfe2f3"),
    "mysql": (3.9, 1.8, 3.4, 1.0, "MySQL endpoint\nmaster/endpoint/dump.py", "#cfe2f3"),
    "slave": (0.2, 0.2, 3.0, 1.0, "slave/ (dumpfilter slave run)\nchecks, relay log", "#d0e0e3"),
    "replica": (3.9, 0.2, 3.4, 1.0, "real MariaDB / MySQL\nreplica (CHANGE MASTER TO)", "#e8e8e8"),
}
ARROWS = [("binlog", "core"), ("source", "binlog"), ("core", "segments"), ("segments", "stream"),
          ("register", "flags"), ("rules", "flags"), ("flags", "stream"), ("stream", "send"),
          ("send", "grpc"), ("send", "mysql"), ("grpc", "slave"), ("mysql", "replica")]


def centre(name, side):
    x, y, w, h, _, _ = BOXES[name]
    return {"top": (x + w / 2, y + h), "bottom": (x + w / 2, y), "left": (x, y + h / 2),
            "right": (x + w, y + h / 2)}[side]


def sides(a, b):
    ax, ay, aw, ah, _, _ = BOXES[a]
    bx, by, bw, bh, _, _ = BOXES[b]
    if abs((ay + ah / 2) - (by + bh / 2)) < 0.3:
        return ("right", "left") if ax < bx else ("left", "right")
    return ("bottom", "top") if ay > by else ("top", "bottom")


OUT = Path(__file__).with_name("architecture.png")


def main(out: Path = OUT) -> None:
    fig, ax = plt.subplots(figsize=(11.5, 9.6))
    for x, y, w, h, label, colour in BOXES.values():
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.05", fc=colour, ec="#444"))
        ax.text(x + w / 2, y + h / 2, label, ha="center", va="center", fontsize=9.5)
    for a, b in ARROWS:
        sa, sb = sides(a, b)
        ax.add_patch(FancyArrowPatch(centre(a, sa), centre(b, sb), arrowstyle="-|>", mutation_scale=14,
                                     color="#333", lw=1.3))
    legend = [("#f4d6a0", "compiled core (Rust, one call per buffer)"), ("#cfe2f3", "master edge"),
              ("#d9ead3", "pure rules"), ("#d0e0e3", "slave edge"), ("#e8e8e8", "outside dumpfilter")]
    for i, (colour, text) in enumerate(legend):
        ax.add_patch(FancyBboxPatch((7.9, 3.55 - 0.55 * i), 0.35, 0.3, boxstyle="round,pad=0.02", fc=colour, ec="#444"))
        ax.text(8.4, 3.7 - 0.55 * i, text, va="center", fontsize=9)
    ax.set_xlim(0, 11.2)
    ax.set_ylim(0, 9.4)
    ax.axis("off")
    ax.set_title("One event's way: binlog bytes -> scanner -> shared segment -> per-slave stream -> slave",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
