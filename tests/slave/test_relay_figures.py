"""Issue #82: a placeholder slave's summary said 295.7 MB received where its relay log held 146 MB,
and `slave run --help` said nothing of the difference. `bytes received` counts what a replica is
sent (each placeholder, heartbeat and the master's file headers), `bytes relayed` what the relay
log holds (its events but the Format_description and Rotate it writes itself), `on the wire` what
came over gRPC; the summary names each and the bytes between the first two. Checked against the
relay log's files, on a real master over a generated binlog, for each skip policy."""

from __future__ import annotations

import re

import pytest

from dumpfilter.binlogs import BinlogFile
from dumpfilter.cli.app import build_parser, main
from dumpfilter.codec import EventType
from dumpfilter.slave.status import status_fields

pytestmark = pytest.mark.grpc

FIGURES = re.compile(r"this run: (\d+) events, (\d+) bytes received \(as a replica is sent them; (\d+) on the "
                     r"wire\), (\d+) events, (\d+) bytes relayed \(the relay log's events but its own "
                     r"Format_description and Rotate(?:; the other (\d+) bytes received are not written to it: "
                     r"placeholders, heartbeats, the master's file headers)?\), (\d+) heartbeats, (\d+) placeholders")
OWN = (EventType.FORMAT_DESCRIPTION, EventType.ROTATE)  # the relay log writes these itself


@pytest.mark.parametrize("policy", ["placeholder", "heartbeat", "empty-transaction"])
def test_the_summary_names_what_the_relay_log_holds(policy, workload_dir, master_factory, tmp_path, capsys):
    _, address = master_factory(workload_dir)
    relay = tmp_path / "relay"
    code = main(["slave", "run", "--master", address, "--server-id", "9", "--relay-log-dir", str(relay),
                 "--replicate-do-db", "db1", "--skip-policy", policy, "--until-caught-up"])
    err = capsys.readouterr().err
    assert code == 0, err
    [line] = [x for x in err.splitlines() if x.startswith("dumpfilter slave:")]
    match = FIGURES.search(line)
    assert match, line
    _events_in, received, wire, events_out, relayed, unwritten, heartbeats, placeholders = (
        int(g) if g is not None else 0 for g in match.groups())
    files = sorted(relay.glob("relay-bin.[0-9]*"))
    events = [e for path in files for e in BinlogFile(path) if e.type_code not in OWN]
    assert relayed == sum(e.size for e in events) and events_out == len(events)  # what the relay log holds
    assert sum(p.stat().st_size for p in files) == relayed + sum(
        4 + sum(e.size for e in BinlogFile(path) if e.type_code in OWN) for path in files)
    assert unwritten == received - relayed > 0  # the difference, named
    fields = status_fields(relay)
    assert (received, wire) == (fields["Bytes_Received"], fields["Wire_Bytes_Received"])
    if policy == "placeholder":
        assert placeholders > 0 and wire < received  # runs of placeholders sent as one event
    if policy == "heartbeat":
        assert heartbeats > 0


def test_the_help_says_what_each_figure_counts():
    text = _help_of("slave", "run")
    for words in ("'bytes relayed' are its events", "'bytes received' count what a replica is sent",
                  "'on the wire' what came over gRPC"):
        assert words in text, text


def _help_of(*command: str) -> str:
    import argparse

    parser = build_parser(list(command))
    for name in command:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return " ".join(parser.format_help().split())
