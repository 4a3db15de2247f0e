"""The charts' data and the self-contained report.html of a simulate run: per slave and skip policy
kept bytes plus overhead add up to what the slave received (checked against an independent count of
the raw batches), the timeline ends where the binlog ends, and report.html renders in a real
headless Chromium with both charts loaded (screenshot checked for the charts' colours)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import skip_or_fail

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(300)]


def test_policy_bytes_are_kept_plus_overhead_as_received(default_run):
    result, capture, _ = default_run
    report = result.report
    policies = report["experiment"]["skip_policies"]
    for row in report["slaves"]:
        assert set(row["policy_bytes"]) == set(policies) | {row["skip_policy"]}
        for policy, detail in row["policy_bytes"].items():
            received = capture.bytes[(row["slave"] if policy == row["skip_policy"] else
                                      _variant_label(result, row["slave"], policy), policy)]
            assert detail["bytes_sent"] == received
            assert detail["kept_bytes"] + detail["overhead_bytes"] == detail["bytes_sent"]
            assert 0 < detail["kept_bytes"] < row["bytes_all"]
        heartbeat = row["policy_bytes"]["heartbeat"]
        hb_key = (row["slave"] if row["skip_policy"] == "heartbeat" else
                  _variant_label(result, row["slave"], "heartbeat"), "heartbeat")
        # heartbeats are the only overhead of the heartbeat policy
        assert heartbeat["overhead_bytes"] == capture.heartbeat_bytes[hb_key] > 0
        # every policy carries the same kept events; only the overhead differs
        kept = {d["kept_bytes"] for d in row["policy_bytes"].values()}
        assert max(kept) - min(kept) <= 0.01 * max(kept)


def _variant_label(result, slave: str, policy: str) -> str:
    (stream,) = [s for s in result.streams if s.plan.spec is not None and s.plan.spec.name == slave
                 and s.plan.skip_policy == policy]
    return stream.plan.label


def test_timeline_runs_from_the_start_to_the_binlog_end(default_run):
    result, _, _ = default_run
    report = result.report
    end = report["source"]["bytes"]
    for row in report["slaves"] + [{"slave": "everything", "bytes_sent": report["experiment"]["everything_stream"]
                                    ["bytes"], **report["experiment"]["everything_stream"]}]:
        points = row["timeline"]
        assert 10 < len(points) <= 400
        positions = [p for p, _, _ in points]
        sent = [b for _, b, _ in points]
        assert positions == sorted(positions) and sent == sorted(sent)
        assert positions[-1] == end and sent[-1] == row["bytes_sent"]
        assert all(b <= p + 4096 for p, b, _ in points) or row["slave"] == "everything"  # never more than the binlog


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def test_report_html_renders_in_a_headless_browser(default_run, tmp_path):
    result, _, work = default_run
    html_path = next(p for p in result.paths if p.name == "report.html")
    text = html_path.read_text()
    # self-contained: nothing fetched from anywhere
    assert not re.search(r"""(src|href)=["'](?!data:)""", text)
    assert text.count('src="data:image/png;base64,') == 2
    for slave in result.report["slaves"]:
        assert f"<td>{slave['slave']}</td>" in text
    assert "Topology" in text and "replicate-wild-ignore-table=db_.t1" in text
    browser = _chromium()
    if browser is None:
        skip_or_fail("a headless Chromium is needed (apt-get install chromium)")
    # Moved away from the run's directory: the page needs nothing beside it.
    alone = tmp_path / "sent-by-mail.html"
    alone.write_text(text)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={tmp_path / 'p'}"]
    env = dict(os.environ, HOME=str(tmp_path))
    dom = subprocess.run([browser, *flags, "--virtual-time-budget=5000", "--dump-dom", alone.as_uri()],
                         capture_output=True, text=True, timeout=120, env=env).stdout
    assert dom.count('data-loaded="1"') == 2, dom[:2000]  # both charts decoded by the browser
    assert 'data-broken' not in dom
    shot = tmp_path / "report.png"
    subprocess.run([browser, *flags, "--window-size=1280,2600", f"--screenshot={shot}", alone.as_uri()],
                   capture_output=True, timeout=120, env=env, check=True)
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)[:, :, :3]
    heartbeat_blue = (pixels[:, :, 0] < 0.3) & (abs(pixels[:, :, 1] - 0.49) < 0.08) & (pixels[:, :, 2] > 0.65)
    assert heartbeat_blue.sum() > 2000  # the stacked bars are on screen, not a broken image
    not_white = (pixels.sum(axis=2) < 2.9).mean()
    assert 0.05 < not_white < 0.9
    Path(work / "report-screenshot.png").write_bytes(shot.read_bytes())
