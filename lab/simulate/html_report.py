"""report.html: one self-contained page per simulation run (charts embedded as data: URIs, inline
CSS, no script and nothing fetched), with the tables of the console report and the topology, so
that it can be opened anywhere or sent to someone as a single file."""

from __future__ import annotations

import base64
import datetime as dt
from pathlib import Path
from typing import Any

from dumpfilter.lab.simulate.breakdowns import _e, _Raw, _table, html_sections
from dumpfilter.lab.simulate.report import (VERIFY_MEANING, lint_breaks, lint_diverges, lint_explanation, lint_fine, mb,
                                            row_cells, summary_line, throughput_line)

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2em auto; max-width: 1180px;
       color: #1d2733; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: .2em; } h2 { font-size: 1.2em; margin-top: 1.8em; border-bottom: 1px solid #d8dee4; }
.meta { color: #57606a; }
table { border-collapse: collapse; margin: .6em 0; font-size: 13px; }
th, td { border: 1px solid #d8dee4; padding: 4px 8px; vertical-align: top; }
th { background: #f3f5f7; text-align: left; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #d8dee4; }
figcaption { color: #57606a; font-size: 12px; }
code { font-size: 12px; background: #f3f5f7; padding: 1px 3px; border-radius: 3px; }
.ok { color: #1a7f37; font-weight: 600; } .bad { color: #cf222e; font-weight: 600; }
tr.breaks td { background: #fff1f0; } tr.breaks td:first-child { border-left: 4px solid #cf222e; font-weight: 600; }
"""


def _flag(text: str, fine: bool) -> str:
    return _e(text) if fine else f'<span class="bad">{_e(text)}</span>'


def _image(path: Path, caption: str) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    # onload/onerror only mark the element (a headless browser test reads the marks); nothing runs otherwise.
    return (f'<figure><img alt="{_e(caption)}" src="data:image/png;base64,{data}" '
            f'onload="this.dataset.loaded=1" onerror="this.dataset.broken=1">'
            f"<figcaption>{_e(caption)}</figcaption></figure>")


def render_html(report: dict[str, Any], charts: dict[str, Path]) -> str:
    source, experiment = report["source"], report["experiment"]
    title = f"dumpfilter simulate: {source['description']}"
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_e(title)}</title>",
             f"<style>{_CSS}</style></head><body>",
             "<h1>Master-side filtering: bytes each slave receives</h1>",
             f"<p class=\"meta\">{_e(source['description'])} &middot; {mb(source['bytes'])} MB of binlog in "
             f"{len(source['files'])} file(s) ({_e(', '.join(source['files']))}) &middot; "
             f"{experiment['streams']} gRPC streams &middot; generated "
             f"{dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}</p>", "<h2>Charts</h2>"]
    breaking = [row["slave"] for row in report["slaves"] if lint_breaks(row)]
    if breaking:
        parts.append(f'<p class="breaks-note"><span class="bad">lint: a replica with the rules of '
                     f'{_e(", ".join(breaking))} would stop</span> (in red in the charts and the table below), '
                     "however much it saves.</p>")
    diverging = [f"{row['slave']} ({lint_diverges(row)} writes)" for row in report["slaves"] if lint_diverges(row)]
    if diverging:
        parts.append(f'<p class="breaks-note"><span class="bad">lint: a replica with the rules of '
                     f'{_e(", ".join(diverging))} would silently diverge</span> (writes it gets wrong without '
                     "stopping: see the notes below the table).</p>")
    parts += [_image(path, caption) for caption, path in charts.items()]

    verified = any(row.get("verified") is not None for row in report["slaves"])
    real = any(row.get("real_replica") is not None for row in report["slaves"])
    headers = ["slave", "skip policy", "without MB (events)", "with MB (events)", "saved MB", "saved %",
               "txns kept/partial/skipped", "wall s", "share MB/s", "lint: replica would stop"] + \
        (["real replica"] if real else []) + (["verify"] if verified else [])
    rows = []
    for row in report["slaves"]:
        c = row_cells(row)
        cells = [row["slave"], row["skip_policy"], c["without"], c["with"], c["saved"], c["saved_pct"], c["txns"],
                 c["wall"], c["share"], _Raw(_flag(c["lint"], lint_fine(row)))]
        if real:
            verdict = row.get("real_replica_verdict")
            cells.append(_Raw(_flag(c["real"], verdict is None or verdict["ok"])))
        if verified:
            cells.append(_Raw({True: '<span class="ok">ok</span>', False: '<span class="bad">FAILED</span>',
                               None: "-"}[row.get("verified")]))
        rows.append(cells)
    parts.append("<h2>Per slave</h2>")
    parts.append(_table(headers, rows, numeric={2, 3, 4, 5, 6, 7, 8}, cls="slaves",
                        row_classes=["breaks" if lint_breaks(row) else "" for row in report["slaves"]]))
    notes = [f"<li><b>{_e(row['slave'])}</b>: lint: {_e(lint_explanation(row))}</li>"
             for row in report["slaves"] if lint_explanation(row)]
    notes += [f"<li><b>{_e(row['slave'])}</b>: real MariaDB replica (server_id "
              f"{_e(row['real_replica_verdict']['server_id'])}): {_e(row['real_replica_verdict']['text'])}</li>"
              for row in report["slaves"] if row.get("real_replica_verdict")]
    if notes:
        parts.append(f"<ul class=\"notes\">{''.join(notes)}</ul>")
    parts.append(f"<p class=\"meta\">{_e(VERIFY_MEANING)}</p>" if verified else "")
    line = throughput_line(report)
    if line:
        parts.append(f"<p class=\"meta\">{_e(line)}</p>")
    parts.append(f"<p><b>{_e(summary_line(report))}</b></p>")

    policies = experiment["skip_policies"]
    if policies:
        prow = [[row["slave"], *("-" if d is None else f"{mb(d['bytes_sent'])} = {mb(d['kept_bytes'])} kept + "
                                 f"{mb(d['overhead_bytes'])} overhead"
                                 for d in map((row.get("policy_bytes") or {}).get, policies))]
                for row in report["slaves"]]
        parts.append("<h2>Bytes sent per skip policy (MB)</h2>")
        parts.append(_table(["slave", *policies], prow, numeric=set(range(1, len(policies) + 1)), cls="policies"))

    parts.append(html_sections(report))  # the bytes by table, every stream's time

    topology = report.get("topology") or {}
    if topology:
        trows = [[s["name"], s["server_id"], repr(s["channel"]), s["filter_semantics"], s["flavor"],
                  s["skip_policy"], _Raw("<br>".join(f"<code>{_e(r)}</code>" for r in s["rules"]) or "(none)"),
                  _Raw("<br>".join(f"<code>{_e(r)}</code>" for r in s["effective_rules"]) or "(everything)")]
                 for s in topology.get("slaves", [])]
        parts.append("<h2>Topology</h2>")
        parts.append(f"<p class=\"meta\">{_e(topology.get('path'))}"
                     + (f" &middot; master policy {_e(topology['policy'])}" if topology.get("policy") else "")
                     + "</p>")
        parts.append(_table(["slave", "server_id", "channel", "semantics", "flavor", "skip policy", "rules",
                             "combined rules (per channel)"], trows, numeric={1}, cls="topology"))

    checks = report.get("verify") or []
    if checks:
        parts.append("<h2>Verification against slave-side filtering</h2><ul>")
        for check in checks:
            if check.get("ok"):
                parts.append(f"<li><span class=\"ok\">ok</span> {_e(check.get('slave'))}: "
                             f"{_e(check.get('transactions'))} transactions of the full stream</li>")
            else:
                items = "".join(f"<li><code>[{_e(d.get('policy'))}] {_e(d.get('transaction'))}: {_e(d.get('problem'))}"
                                f"</code></li>" for d in check.get("differences", [])[:50])
                parts.append(f"<li><span class=\"bad\">FAILED</span> {_e(check.get('slave'))}: "
                             f"{_e(check.get('total_differences'))} difference(s)<ul>{items}</ul></li>")
        parts.append("</ul>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_html(report: dict[str, Any], path: Path, charts: dict[str, Path]) -> Path:
    path.write_text(render_html(report, charts), encoding="utf-8")
    return path
