"""Topology files for simulate: every malformed key is reported with its name and line, through
the parser and through the command (exit status 2, no traceback)."""

from __future__ import annotations

import pytest

from dumpfilter.cli.app import main as dumpfilter_main
from dumpfilter.topology import TopologyError, parse_topology

SLAVE = '[[slaves]]\nname = "a"\nserver_id = 2\n'

CASES = [
    # (text, expected start of the message)
    ('[[slaves]]\nserver_id = 2\n', "<topology>:1: slaves.name: missing"),
    ('[[slaves]]\nname = "a"\n', "<topology>:1: slaves.server_id: missing"),
    ('[[slaves]]\nname = "a"\nserver_id = "two"\n', "<topology>:3: slaves.server_id: 'two' is not an integer"),
    (SLAVE + 'skip_policy = "drop-it"\n', "<topology>:4: slaves.skip_policy: 'drop-it' is not one of"),
    (SLAVE + 'rules = ["replicate-do-table=nodot"]\n', "<topology>:4: slaves.rules:"),
    (SLAVE + 'rules = "replicate-do-db=db1"\n', "<topology>:4: slaves.rules: must be a list"),
    (SLAVE + 'change_replication_filter = "CHANGE REPLICATION FILTER NOPE = (x)"\n',
     "<topology>:4: slaves.change_replication_filter:"),
    (SLAVE + 'change_replication_filter = "CHANGE MASTER TO DO=\'db1.%\'"\n', "<topology>:1: slaves.filter_semantics:"),  # key absent: the slave's header line
    (SLAVE + 'user = 3\n', "<topology>:4: slaves.user: must be a string"),
    ('[master]\nbinlogs = "a"\nfiles = ["b"]\n' + SLAVE, "<topology>:3: master.files: give one binlog source"),
    ('[master]\nbinlogs = 3\n' + SLAVE, "<topology>:2: master.binlogs: must be the path"),
    ('[master]\nfiles = []\n' + SLAVE, "<topology>:2: master.files: must be a non-empty list"),
    ('[master]\npolicy = 1\n' + SLAVE, "<topology>:2: master.policy:"),
    ('[master.workload]\nseed = 1\ntransactions = "many"\n' + SLAVE,
     "<topology>:3: master.workload.transactions: 'many' is not an int"),
    ('[master.workload]\nbinlog_format = "rows"\n' + SLAVE, "<topology>:2: master.workload.binlog_format:"),
    ('[master.workload]\ncross_db_share = 2\n' + SLAVE, "<topology>:2: master.workload.cross_db_share:"),
    ('[master.workload]\ninsert_select_share = -0.5\n' + SLAVE, "<topology>:2: master.workload.insert_select_share:"),
    ('[master.workload]\ncolour = 1\n' + SLAVE, "<topology>:2: master.workload.colour: unknown key"),
    ('[master.mariadb]\ntransactions = true\n' + SLAVE, "<topology>:2: master.mariadb.transactions:"),
    (SLAVE + '[experiment]\nskip_policies = ["heartbeat", "teleport"]\n',
     "<topology>:5: experiment.skip_policies: 'teleport' is not one of"),
    (SLAVE + '[experiment]\nmaster_vs_slave = "yes"\n', "<topology>:5: experiment.master_vs_slave:"),
    (SLAVE + '[experiment]\ncompare = []\n', "<topology>:5: experiment.compare: unknown key"),
    ('[master\n' + SLAVE, "<topology>: not valid TOML"),
]


@pytest.mark.parametrize("text, message", CASES, ids=[m.split(": ")[1][:30] for _, m in CASES])
def test_errors_name_key_and_line(text, message):
    with pytest.raises(TopologyError) as info:
        parse_topology(text)
    assert str(info.value).startswith(message), str(info.value)


def test_old_topologies_still_parse():
    """A topology without [master] source keys or [experiment] parses as before; extra [master]
    keys are left to the command."""
    topology = parse_topology('[master]\nbinlog_note = "x"\n' + SLAVE)
    assert topology.source is None
    assert topology.experiment.master_vs_slave and len(topology.experiment.skip_policies) == 3
    assert topology.unknown_master_keys == (("binlog_note", "<topology>:2"),)


@pytest.mark.parametrize("text, message", [
    ('[master]\nbinlog_note = "x"\n' + SLAVE, ":2: master.binlog_note: unknown key"),
    ('[master]\nbinlogs = "no/such/dir"\n' + SLAVE, "master.binlogs:"),
    ('[master]\npolicy = "missing-policy.toml"\n[master.workload]\ntransactions = 5\n' + SLAVE, "master.policy:"),
    (SLAVE + 'skip_policy = "nope"\n', ":4: slaves.skip_policy"),
])
def test_simulate_command_reports_topology_errors(tmp_path, capsys, text, message):
    path = tmp_path / "topology.toml"
    path.write_text(text)
    status = dumpfilter_main(["simulate", "--topology", str(path), "--out", str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("dumpfilter: error: ") and message in err, err
    assert "Traceback" not in err
