"""The x labels of the bytes-per-slave chart (simulate's report.png, experiment's bandwidth.png)
never overlap (issue #60, goal 3): the worst cases, several slaves with long names that lint
flags (a second line under each name), rendered and measured with matplotlib's own renderer."""

from __future__ import annotations

import matplotlib
import pytest

from dumpfilter import charts

matplotlib.use("Agg")
POLICIES = ("heartbeat", "placeholder", "empty_transaction")


def _slaves(count: int, name: str) -> list[dict]:
    return [{"slave": f"{name}-{i}", "bytes_all": 3_000_000, "breaks": "error 1049" if i % 3 != 2 else None,
             "bars": [{"policy": p, "sent": 1_000_000 + 1000 * i, "overhead": 20_000, "own": p == "heartbeat"}
                      for p in POLICIES]}
            for i in range(count)]


def _overlaps(fig, ax) -> list[tuple[str, str]]:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    labels = [label for label in ax.get_xticklabels() if label.get_text()]
    boxes = [label.get_window_extent(renderer) for label in labels]
    return [(labels[i].get_text(), labels[j].get_text()) for i in range(len(boxes)) for j in range(i + 1, len(boxes))
            if boxes[i].x1 > boxes[j].x0 and boxes[j].x1 > boxes[i].x0
            and boxes[i].y1 > boxes[j].y0 and boxes[j].y1 > boxes[i].y0]


@pytest.mark.parametrize("count,name", [(2, "replica-with-a-rather-long-name"), (3, "analytics-replica-eu"),
                                        (6, "shop-replica-number"), (16, "crm-reporting-replica"),
                                        (64, "logs-archive-replica-with-long-name")])
def test_flagged_labels_never_overlap(count, name):
    import matplotlib.pyplot as plt

    slaves = _slaves(count, name)
    fig, drawn = charts.policy_figure(slaves, title="worst case")
    try:
        ax = fig.axes[0]
        assert _overlaps(fig, ax) == []
        labels = [label.get_text() for label in ax.get_xticklabels()]
        # every slave named, and every flagged one still says so, in red
        assert all(s["slave"] in text for s, text in zip(slaves, labels))
        for s, label in zip(slaves, ax.get_xticklabels()):
            assert ("1049" in label.get_text()) == bool(s["breaks"])
            assert (label.get_color() == "#cf222e") == bool(s["breaks"])
        # inside the figure: a label cut at the bottom edge is no better than one overlapped
        fig.canvas.draw()
        for label in ax.get_xticklabels():
            box = label.get_window_extent(fig.canvas.get_renderer())
            assert box.y0 >= -1 and box.x0 >= -1 and box.x1 <= fig.bbox.x1 + 1
    finally:
        plt.close(fig)
    assert len(drawn) == count * len(POLICIES)


def test_the_old_layout_overlapped_flagged_slaves():
    """The issue's case (two flagged slaves side by side), as the chart laid it out before (1.7
    inches a slave, at least 6; level labels up to four slaves, in bold): the measurement the
    test above relies on does see the overlap."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.0, 4.8))
    try:
        slaves = _slaves(2, "slave")
        ax.set_xticks(range(2), [charts.tick_label(s) for s in slaves], rotation=0)
        for label in ax.get_xticklabels():
            label.set_fontweight("bold")
        ax.set_xlim(-0.6, 1.6)
        fig.tight_layout()
        assert _overlaps(fig, ax)
    finally:
        plt.close(fig)
