"""The charts of `dumpfilter simulate` and `dumpfilter experiment` (PNG, matplotlib Agg): the bytes
sent per slave and skip policy (`policy_chart`), the MB/s sent against binlog time, each line's
peak marked (`timeline_chart`: when, in the primary's day, the bytes and the savings come), and
the MB sent per hour (or minute) of binlog time (`hourly_chart`)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

from dumpfilter.skip_policy import NAMES as SKIP_POLICIES

if TYPE_CHECKING:  # matplotlib is imported when a chart is drawn, never with this module
    import datetime as dt

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.transforms import Bbox
    from numpy.typing import ArrayLike

# A row of the report the charts read (a slave, a bar, a series, an hour): the simulate report's
# and the experiment's dicts, built from report.json's and Spark's rows (read by key, as JSON).
Row = Mapping[str, Any]
# A timeline point as report.json holds it: [binlog position, cumulative bytes sent, binlog time
# or None] (a 2-item point has no time).
Point = Sequence[Any]


class DrawnBar(TypedDict):
    """`policy_chart`: one bar drawn."""

    slave: str
    policy: str
    bytes: int     # the bar's height
    label: str     # the saving printed over it ("" without `bytes_all`)
    breaks: str | None


class TimelineBins(TypedDict):
    """`timeline_bins`: the bins of binlog time and each line's MB/s per bin."""

    start: int
    end: int
    width: int
    count: int
    lines: list[tuple[str, list[float], bool]]   # (name, rates, breaks)


class TimelineRow(TypedDict, total=False):
    """A row of timeline.csv (TIMELINE_FIELDS): a bin's rate, or (no timestamps) a point's bytes."""

    series: str
    lint_breaks: bool
    bin_start_epoch: int
    bin_start_utc: str
    bin_seconds: int
    mb_s: float
    peak: bool
    binlog_position: int
    bytes_sent_total: int


class DrawnLine(TypedDict):
    """A line as matplotlib holds it: its label and y values (and x, against position)."""

    label: str
    y: list[float]
    x: NotRequired[list[float]]


class DrawnPeak(TypedDict):
    slave: str
    peak_time: int
    peak_mb_s: float


class DrawnTimeline(TypedDict):
    """`timeline_chart`: the bins' start and width (None against position), the peaks, the lines."""

    start: int | None
    width: int | None
    series: list[DrawnPeak]
    unit: str
    lines: list[DrawnLine]


class DrawnHours(TypedDict):
    """`hourly_chart`: the hours, their edges (epoch seconds), the slaves drawn, each line's bytes."""

    hours: list[int]
    edges: list[int]
    slaves: list[str]
    lines: dict[str, list[int]]

# One colour per skip policy (kept: solid; overhead: the same colour, hatched and lighter).
POLICY_COLORS = dict(zip(SKIP_POLICIES, ("#2f7ebc", "#e07b39", "#3a9d5d")))  # in the policies' order
_FALLBACK = ("#7b5ea7", "#b8860b", "#c0392b")
REFERENCE_COLOR = "#5f6b7a"


def _use_agg() -> None:
    """matplotlib draws off-screen (PNG); called before each `import matplotlib.pyplot`."""
    import matplotlib

    matplotlib.use("Agg")


# matplotlib's annotations take numbers where its units registry also takes datetimes (matplotlib.dates
# converts them on a date axis): the date axes' x values and limits pass through these, unchanged.
def _dates(values: Sequence[dt.datetime]) -> ArrayLike:
    return cast("ArrayLike", values)


def _date(value: dt.datetime) -> float:
    return cast(float, value)


def _floats(values: ArrayLike) -> list[float]:
    """A line's x or y values (`Line2D.get_ydata()`), as floats."""
    import numpy as np

    return [float(v) for v in np.asarray(values, dtype=float)]


def _color(policy: str, index: int) -> str:
    return POLICY_COLORS.get(policy, _FALLBACK[index % len(_FALLBACK)])


def saved_percent(bytes_all: int, bytes_sent: int) -> float | None:
    """The share of the bytes a slave would receive without master-side filtering that it is not
    sent: the one number the tables and the charts print (one decimal)."""
    return round(100.0 * (bytes_all - bytes_sent) / bytes_all, 2) if bytes_all else None


CHART_MAX_INCHES = 22.0


def policy_chart(slaves: Sequence[Row], path: str | os.PathLike[str], *, title: str) -> list[DrawnBar]:
    """`policy_figure`, saved as a PNG at `path`; returns what was drawn."""
    fig, drawn = policy_figure(slaves, title=title)
    _saved(fig, path)
    return drawn


CHART_DPI = 110


def _saved(fig: Figure, path: str | os.PathLike[str]) -> None:
    """`fig` written as a PNG at `path`, then closed (pyplot keeps every open figure)."""
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=CHART_DPI)
    plt.close(fig)


def _finish(fig: Figure, ax: Axes, path: str | os.PathLike[str], title: str, /, **legend: Any) -> None:
    """The line charts' last steps: grid, title, the legend (when a line has a label), laid out, saved."""
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=10)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**legend)
    fig.tight_layout()
    _saved(fig, path)


def policy_figure(slaves: Sequence[Row], *, title: str) -> tuple[Figure, list[DrawnBar]]:
    """`slaves`: dicts with `slave`, `bytes_all` (what it would get without master-side filtering)
    and `bars`: a list of {`policy`, `sent`, `overhead`, `own`} (own: the slave's configured
    policy): each bar is the bytes sent, stacked as the skip policy's own events (overhead) over
    the rest (the kept events, with the framing a policy keeps of a skipped transaction). Returns
    (the figure, what was drawn), per bar: slave, policy, height in bytes and the label over it. A slave's
    `breaks` (lint's first predicted error, e.g. "1049 at master-bin.000001:355") marks it in red
    under its name: a replica with its rules would stop, whatever it saves."""
    _use_agg()
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    policies = list(dict.fromkeys(bar["policy"] for s in slaves for bar in s["bars"]))
    most = max((len(s["bars"]) for s in slaves), default=1)
    width = 0.8 / max(most, 1)
    # Wider with more slaves, up to a bound: 64 slaves at 1.7 inches each made a 12 000-pixel PNG
    # that took longer to draw than the experiment took to count.
    fig, ax = plt.subplots(figsize=(min(CHART_MAX_INCHES, max(6.0, 1.7 * len(slaves) + 2.5)), 4.8))
    top = 0.0
    drawn: list[DrawnBar] = []
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
            percent = saved_percent(slave.get("bytes_all") or 0, bar["sent"])
            label = "" if percent is None else f"{-percent:+.1f}%"
            if label:
                ax.annotate(label, (x, total), ha="center", va="bottom", fontsize=7 if len(slaves) <= 16 else 5,
                            rotation=0 if len(slaves) <= 16 else 90)
            drawn.append({"slave": slave["slave"], "policy": bar["policy"], "bytes": round(total * 1e6),
                          "label": label, "breaks": slave.get("breaks")})
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
    ax.set_xticks(range(len(slaves)), [tick_label(s) for s in slaves])
    for tick, slave in zip(ax.get_xticklabels(), slaves):
        if slave.get("breaks"):  # the slave whose rules lint says stop a replica: red, and said under its name
            tick.set_color("#cf222e")
            tick.set_fontweight("bold")
    ax.set_xlim(-0.6, len(slaves) - 0.4)
    ax.set_ylim(0, top * 1.22 or 1.0)
    ax.set_ylabel("MB sent to the slave")
    ax.set_title(title, fontsize=10)
    handles = [Patch(color=_color(p, k), label=p) for k, p in enumerate(policies)]
    handles += [Patch(facecolor="#bbbbbb", edgecolor="black", label="kept events (outlined: the slave's own policy)"),
                Patch(facecolor="#dddddd", hatch="///", edgecolor="white", label="skip-policy overhead")]
    ax.legend(handles=handles, fontsize=7, loc="upper left", ncol=2, framealpha=0.9)
    fig.set_dpi(CHART_DPI)  # measured as it is saved
    fit_tick_labels(fig, ax, [s["slave"] + (f" [stops: {s['breaks']}]" if s.get("breaks") else "") for s in slaves])
    return fig, drawn


def tick_label(slave: Row) -> str:
    """A slave's x label: its name, and under it lint's verdict when a replica with its rules stops."""
    name: str = slave["slave"]
    return name + (f"\nlint: a replica stops ({slave['breaks']})" if slave.get("breaks") else "")


def _overlapping(boxes: Sequence[Bbox]) -> bool:
    """Whether two of the boxes (in display pixels, in the ticks' order) share any area."""
    return any(a.x1 > b.x0 + 0.5 and b.x1 > a.x0 + 0.5 and a.y1 > b.y0 + 0.5 and b.y1 > a.y0 + 0.5
               for i, a in enumerate(boxes) for b in boxes[i + 1:])


TICK_SIZES = (9.0, 8.0, 7.0, 6.0, 5.0, 4.0)


def fit_tick_labels(fig: Figure, ax: Axes, short: Sequence[str]) -> None:
    """Lay the x tick labels out so that no two overlap, as the renderer measures them: level,
    then upright, each at the largest font size that fits (the layout tightened after each try,
    since a taller label narrows the axes), and last on one line each (`short`), upright."""
    labels = ax.get_xticklabels()
    upright = TICK_SIZES if len(labels) <= 16 else TICK_SIZES[3:]  # many slaves: small from the start
    tries = [(0, size, False) for size in TICK_SIZES if len(labels) <= 8] + \
        [(90, size, False) for size in upright] + [(90, size, True) for size in TICK_SIZES[2:]]
    shortened = False
    for rotation, size, one_line in tries:
        if one_line and not shortened:  # the same ticks, one line each: their colours and weights stay
            looks = [(label.get_color(), label.get_fontweight()) for label in labels]
            ax.set_xticks(ax.get_xticks(), list(short))
            for label, (color, weight) in zip(ax.get_xticklabels(), looks):
                label.set_color(color)
                label.set_fontweight(weight)
            shortened = True
        ax.tick_params(axis="x", labelrotation=rotation, labelsize=size)
        fig.tight_layout()  # lays the ticks out, as a draw would, without drawing the bars
        # Agg's canvas (`_use_agg`) has one; matplotlib's backend_agg is unannotated, FigureCanvasBase lacks it
        renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
        labels = ax.get_xticklabels()
        if not _overlapping([label.get_window_extent(renderer) for label in labels if label.get_text()]):
            return


TIMELINE_BINS = 60  # bins of binlog time across the chart: each is a whole number of seconds


def rate_bins(points: Sequence[Point], start: int, width: int, count: int, end: int | None = None) -> list[float]:
    """MB per second of binlog time in `count` bins of `width` seconds from `start` (the last one
    ending after second `end`, when given: it may be longer): `points` are [position, cumulative
    bytes sent, binlog time]; the bytes sent between two points are counted at the later point's
    time (the binlog up to there was served), a point without a time at the last known one."""
    bins = [0.0] * count
    before, last_time = 0, None
    for point in points:
        sent, when = point[1], point[2] if len(point) > 2 else None
        when = last_time if when is None else when
        if when is not None:
            k = min(max(int((when - start) // width), 0), count - 1)
            bins[k] += sent - before
            last_time = when
        before = sent
    last = width if end is None else end + 1 - (start + (count - 1) * width)
    return [b / (width if k < count - 1 else max(last, 1)) / 1e6 for k, b in enumerate(bins)]


def peak(rates: Sequence[float]) -> int | None:
    """The bin of the highest rate (the first of equals), or None when nothing was sent."""
    top = max(rates, default=0.0)
    return rates.index(top) if top > 0 else None


REFERENCE_LABEL = "without master-side filtering"
LINT_TAG = "  [lint: a replica stops]"
TIMELINE_FIELDS = ["series", "lint_breaks", "bin_start_epoch", "bin_start_utc", "bin_seconds", "mb_s", "peak",
                   "binlog_position", "bytes_sent_total"]


def _timeline_lines(series: Sequence[Row], reference: Sequence[Point] | None) -> list[tuple[str, Sequence[Point], bool]]:
    """(name, points, breaks) of every line `timeline_chart` draws, in its order: the reference first."""
    lines: list[tuple[str, Sequence[Point], bool]] = [(REFERENCE_LABEL, reference, False)] if reference else []
    return lines + [(item["slave"], item["points"], bool(item.get("breaks"))) for item in series if item["points"]]


def timeline_bins(series: Sequence[Row], reference: Sequence[Point] | None = None) -> TimelineBins | None:
    """What `timeline_chart` draws against binlog time: the bins (`start`, `width` seconds, `count`,
    the span's `end`) and each line's MB/s per bin ([(name, rates, breaks)]); None for a binlog
    without timestamps (drawn against position)."""
    times: list[int] = [p[2] for item in series for p in item["points"] if len(p) > 2 and p[2] is not None]
    times += [p[2] for p in reference or () if len(p) > 2 and p[2] is not None]
    if not times:
        return None
    start, end = min(times), max(times)
    width = max(1, -(-(end - start + 1) // TIMELINE_BINS))
    count = max(1, (end - start + 1) // width)  # the last bin takes the remainder: never a short, noisy one
    return {"start": start, "end": end, "width": width, "count": count,
            "lines": [(name, rate_bins(points, start, width, count, end), breaks)
                      for name, points, breaks in _timeline_lines(series, reference)]}


def timeline_rows(series: Sequence[Row], reference: Sequence[Point] | None = None) -> list[TimelineRow]:
    """Everything `timeline_chart` draws, as rows for the CSV beside it (TIMELINE_FIELDS): per line
    and bin its MB/s (`peak`: the bin its peak mark is on); for a binlog without timestamps, per line
    and point the binlog position and the bytes sent up to it."""
    import datetime as dt

    bins = timeline_bins(series, reference)
    rows: list[TimelineRow] = []
    if bins is None:
        for name, points, breaks in _timeline_lines(series, reference):
            rows += [{"series": name, "lint_breaks": breaks, "binlog_position": p[0], "bytes_sent_total": p[1]}
                     for p in [(0, 0), *points]]
        return rows
    start, width, count = bins["start"], bins["width"], bins["count"]
    for name, rates, breaks in bins["lines"]:
        top = peak(rates)
        for k, rate in enumerate(rates):
            at = start + k * width
            rows.append({"series": name, "lint_breaks": breaks, "bin_start_epoch": at,
                         "bin_start_utc": dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S"),
                         "bin_seconds": width if k < count - 1 else bins["end"] + 1 - at, "mb_s": rate,
                         "peak": k == top})
    return rows


def timeline_chart(series: Sequence[Row], path: str | os.PathLike[str], *, title: str,
                   reference: Sequence[Point] | None = None) -> DrawnTimeline:
    """`series`: dicts with `slave`, `points` [(binlog position over the whole series, cumulative
    bytes sent, binlog time)] and optionally `breaks` (lint says a replica with its rules stops:
    marked in the legend); `reference`: the points of a slave without master-side filtering.

    Drawn against binlog time (the events' timestamps, UTC): MB/s sent per bin of binlog seconds,
    each series' peak marked. A binlog whose events carry no timestamp is drawn as cumulative bytes
    against position instead. Returns what was drawn: the bins' start and width (seconds) and each
    series' peak (time, MB/s), and `lines`: each line drawn, as matplotlib holds it (its label and
    y values, in the unit of the axis: `unit`). `timeline_rows` gives the same figures for the CSV."""
    bins = timeline_bins(series, reference)
    if bins is None:
        return _position_chart(series, path, title=title, reference=reference)
    import datetime as dt

    import matplotlib.dates as mdates

    _use_agg()
    import matplotlib.pyplot as plt

    start, end, width, count = bins["start"], bins["end"], bins["width"], bins["count"]
    xs = [dt.datetime.fromtimestamp(start + k * width, dt.UTC) for k in range(count)]
    xs.append(dt.datetime.fromtimestamp(max(end + 1, start + count * width), dt.UTC))
    fig, ax = plt.subplots(figsize=(9.0, 4.8))
    reference_style = {"color": REFERENCE_COLOR, "linestyle": "--", "linewidth": 1.1}
    every = [(name + (LINT_TAG if breaks else ""), rates, reference_style if name == REFERENCE_LABEL and reference
              and k == 0 else {"linewidth": 1.5}, breaks) for k, (name, rates, breaks) in enumerate(bins["lines"])]
    highest = max((max(rates) for _, rates, _, _ in every), default=0.0)
    scale, unit = (1.0, "MB/s") if highest >= 1.0 else (1e3, "kB/s")  # a small binlog reads better in kB/s
    drawn: DrawnTimeline = {"start": start, "width": width, "series": [], "unit": unit, "lines": []}
    top = 0.0
    for label, rates, style, breaks in every:
        shown = [r * scale for r in rates]
        (line,) = ax.plot(_dates(xs), [*shown, shown[-1]], drawstyle="steps-post", label=label, **style)
        drawn["lines"].append({"label": str(line.get_label()), "y": _floats(line.get_ydata())[:-1]})
        k = peak(rates)
        if k is None:
            continue
        at = xs[k] + dt.timedelta(seconds=width / 2)
        top = max(top, shown[k])
        ax.plot(_dates([at]), [shown[k]], marker="v", markersize=7, color=line.get_color(),
                markeredgecolor="#cf222e" if breaks else line.get_color())
        ax.annotate(f"{shown[k]:.1f}", (at, shown[k]), xytext=(0, 6), textcoords="offset points", ha="center",
                    fontsize=7, color=line.get_color())
        drawn["series"].append({"slave": label, "peak_time": start + k * width, "peak_mb_s": rates[k]})
    # matplotlib.dates has no annotations (no .pyi): its classes' calls are untyped
    locator = mdates.AutoDateLocator()  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    ax.set_xlim(_date(xs[0]), _date(xs[-1]))
    ax.set_xlabel(f"binlog time (UTC, the events' timestamps; {width} s bins)")
    ax.set_ylabel(f"{unit} sent to the slave")
    ax.set_ylim(0, top * 1.35 or 1.0)
    _finish(fig, ax, path, title, fontsize=7, loc="upper left", ncol=2, framealpha=0.9, title="v: each line's peak",
            title_fontsize=7)
    return drawn


def _position_chart(series: Sequence[Row], path: str | os.PathLike[str], *, title: str,
                    reference: Sequence[Point] | None = None) -> DrawnTimeline:
    """Cumulative bytes sent against the master's binlog position: for a binlog without timestamps."""
    _use_agg()
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.0, 4.8))
    drawn: DrawnTimeline = {"start": None, "width": None, "series": [], "unit": "MB", "lines": []}
    for k, (name, points, breaks) in enumerate(_timeline_lines(series, reference)):
        xs, ys = zip(*[(0, 0), *[(p[0], p[1]) for p in points]])
        style = ({"color": REFERENCE_COLOR, "linestyle": "--", "linewidth": 1.2} if reference and k == 0
                 else {"linewidth": 1.6})
        (line,) = ax.plot([x / 1e6 for x in xs], [y / 1e6 for y in ys], label=name + (LINT_TAG if breaks else ""),
                          **style)
        drawn["lines"].append({"label": str(line.get_label()), "x": _floats(line.get_xdata()),
                               "y": _floats(line.get_ydata())})
    ax.set_xlabel("master binlog position (MB, over all files; the binlog has no timestamps)")
    ax.set_ylabel("cumulative MB sent to the slave")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    _finish(fig, ax, path, title, fontsize=8, loc="upper left")
    return drawn


HOURLY_SLAVES = 8  # lines drawn: the slaves sent the most (every slave stays in the table)


def hourly_chart(rows: Sequence[Row], path: str | os.PathLike[str], *, title: str, bucket: int = 3600) -> DrawnHours:
    """`hourly_figure`, saved to `path`."""
    fig, drawn = hourly_figure(rows, title=title, bucket=bucket)
    _saved(fig, path)
    return drawn


def hourly_figure(rows: Sequence[Row], *, title: str, bucket: int = 3600) -> tuple[Figure, DrawnHours]:
    """`rows`: dicts with `slave`, `hour_epoch`, `bytes_all` and `bytes_sent` (experiment's
    by-hour table; `minute_epoch` for its by-minute one, `bucket` 60), and optionally
    `from_epoch` and `to_epoch`: the first and last second of the hour that the binlog holds (its
    own time range: a two-minute binlog is drawn over its two minutes, not over the hour, nor over
    years as an axis around one point is). MB sent per hour (minute) of binlog time (UTC), each
    one a step over its seconds, one line per slave for the HOURLY_SLAVES slaves sent the most,
    and what a slave without master-side filtering would be sent as a dashed reference. Returns
    the figure and what was drawn: the hours, their edges (epoch seconds), each line's slave and
    heights (bytes per hour or minute). The caption under the axis is laid out inside the figure."""
    import datetime as dt

    _use_agg()
    import matplotlib.pyplot as plt

    unit = "hour" if bucket == 3600 else "minute"
    key = f"{unit}_epoch"
    hours: list[int] = sorted({r[key] for r in rows})
    by_slave: dict[str, dict[int, int]] = {}
    everything: dict[int, int] = {}
    begins: dict[int, int] = {}
    ends: dict[int, int] = {}
    for r in rows:
        hour = r[key]
        by_slave.setdefault(r["slave"], {})[hour] = r["bytes_sent"]
        everything[hour] = max(everything.get(hour, 0), r["bytes_all"])
        begins[hour] = max(hour, int(r.get("from_epoch") or hour))
        ends[hour] = min(hour + bucket, int(r["to_epoch"]) + 1 if r.get("to_epoch") is not None else hour + bucket)
    top = sorted(by_slave, key=lambda name: -sum(by_slave[name].values()))[:HOURLY_SLAVES]
    drawn: DrawnHours = {"hours": hours, "edges": [], "slaves": top, "lines": {}}
    fig, ax = plt.subplots(figsize=(9.0, 4.8))
    if hours:
        # every hour between the first and the last (an hour without events is 0), within the binlog's range
        every = list(range(hours[0], hours[-1] + 1, bucket)) if len(hours) > 1 and \
            (hours[-1] - hours[0]) // 3600 < 24 * 92 else hours
        start, end = begins[hours[0]], max(ends[hours[-1]], begins[hours[0]] + 1)
        edges = [start, *every[1:], end]
        drawn["edges"] = edges
        xs = [dt.datetime.fromtimestamp(e, dt.UTC) for e in edges]

        def line(values: dict[int, int], label: str, **style: Any) -> list[int]:
            heights = [values.get(h, 0) for h in every]
            shown = [b / 1e6 for b in heights]
            ax.plot(_dates(xs), [*shown, shown[-1]], drawstyle="steps-post", label=label, **style)
            return heights

        drawn["lines"]["without master-side filtering"] = line(everything, "without master-side filtering",
                                                              color=REFERENCE_COLOR, linestyle="--")
        for name in top:
            drawn["lines"][name] = line(by_slave[name], name, linewidth=1.5)
        import matplotlib.dates as mdates

        # whole seconds at least; the ticks say the time of day (the date is in the axis label).
        # matplotlib.dates has no annotations (no .pyi): its classes' calls are untyped
        locator = (mdates.SecondLocator() if end - start <= 10  # type: ignore[no-untyped-call]
                   else mdates.AutoDateLocator())  # type: ignore[no-untyped-call]
        ax.xaxis.set_major_locator(locator)
        formats = ["%Y", "%b", "%b %d", "%H:%M", "%H:%M", "%H:%M:%S"]
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(  # type: ignore[no-untyped-call]
            locator, show_offset=False, formats=formats, zero_formats=formats))
        ax.set_xlim(_date(xs[0]), _date(xs[-1]))
        seconds = end - start
        took = (f"{seconds} s" if seconds < 120 else f"{seconds // 60} min {seconds % 60} s" if seconds < 7200
                else f"{seconds / 3600:.1f} h")
        # two lines: on one, the caption ran past the figure's right edge
        ax.set_xlabel(f"binlog time (UTC) from {xs[0]:%Y-%m-%d %H:%M:%S} to {xs[-1]:%Y-%m-%d %H:%M:%S}: {took}\n"
                      f"in {len(every)} {unit}(s); each step is its {unit}'s bytes")
    ax.set_ylabel(f"MB sent in the {unit}")
    ax.set_ylim(0, max(everything.values(), default=0) / 1e6 * 1.3 or 1.0)  # the legend above the lines
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left", ncol=2, framealpha=0.9)
    fig.tight_layout()
    return fig, drawn
