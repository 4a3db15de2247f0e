"""`dumpfilter experiment`: Spark and local counts agree, and match byte counts made here from the
binlog files directly; topology errors name the key and line."""

from __future__ import annotations

import csv
import io

import pytest

from dumpfilter.codec import EventType, group_transactions, read_events
from dumpfilter.binlogs import binlog_paths
from dumpfilter.cli.app import main as dumpfilter_main
from dumpfilter.topology import TopologyError, parse_topology
from dumpfilter.spark_jobs.bandwidth_experiment import count_parts_local, count_parts_spark
from dumpfilter.spark_jobs.tasks.counts import merge_counts
from dumpfilter.spark_jobs.tasks.chunks import input_files, plan_chunks

TOPOLOGY = """
[[slaves]]
name = "everything"
server_id = 2

[[slaves]]
name = "nothing-hb"
server_id = 3
rules = ["replicate-do-db=no_such_db"]

[[slaves]]
name = "db1-ph"
server_id = 4
rules = ["replicate-do-db=db1"]
skip_policy = "placeholder"

[[slaves]]
name = "not-db2-empty"
server_id = 5
change_replication_filter = "CHANGE REPLICATION FILTER REPLICATE_WILD_IGNORE_TABLE = ('db2.%')"
skip_policy = "empty-transaction"
"""


def _independent(src):
    """Totals and the 'nothing' slave's bytes, straight from the files: control events are sent,
    and each maximal run of other units costs one heartbeat of 19 + len(file name) + 4 bytes."""
    total_events = total_bytes = nothing_bytes = nothing_events = 0
    for path in binlog_paths(src):
        events = read_events(path.read_bytes())
        total_events += len(events)
        total_bytes += path.stat().st_size - 4
        in_stretch = False
        for unit in group_transactions(events):
            if unit.kind == "control":
                nothing_events += 1 + in_stretch
                nothing_bytes += unit.size + in_stretch * (19 + len(path.name) + 4)
                in_stretch = False
            else:
                in_stretch = True
        nothing_events += in_stretch
        nothing_bytes += in_stretch * (19 + len(path.name) + 4)
    return total_events, total_bytes, nothing_events, nothing_bytes


@pytest.mark.spark
@pytest.mark.parametrize("workload", ["row-mariadb", "statement-mariadb"])
def test_experiment_counts_match_independent_counts_and_local(spark, workloads, workload):
    topology = parse_topology(TOPOLOGY)
    src = workloads[workload]
    chunks = plan_chunks(input_files([src]), 15_000)
    names = [s.name for s in topology.slaves]
    totals = merge_counts(count_parts_spark(spark, chunks, topology.slaves), names)
    assert totals == merge_counts(count_parts_local(plan_chunks(input_files([src]), None), topology.slaves), names)
    events, size, nothing_events, nothing_bytes = _independent(src)
    by_name = {t.slave: t for t in totals}
    for t in totals:
        assert (t.events_read, t.bytes_read) == (events, size)
    assert (by_name["everything"].events_sent, by_name["everything"].bytes_sent) == (events, size)
    assert (by_name["nothing-hb"].events_sent, by_name["nothing-hb"].bytes_sent) == (nothing_events, nothing_bytes)
    ph = by_name["db1-ph"]
    assert ph.events_sent == events  # every event is sent, as itself or as a placeholder
    # every byte sent for a skipped transaction (its framing too) is the placeholder policy's, as the master counts it
    assert ph.bytes_sent == ph.kept_bytes + ph.placeholder_bytes
    assert ph.placeholder_bytes > _framing_bytes_of_skipped(src, ph) > 0
    empty = by_name["not-db2-empty"]
    assert empty.bytes_sent == empty.kept_bytes + empty.empty_transaction_bytes + empty.heartbeat_bytes


def _framing_bytes_of_skipped(src, counts):
    """Placeholder policy: skipped transactions' framing is sent as is; recomputed from the files
    for the db1 slave (MariaDB: the GTID and XID/COMMIT of transactions with no db1 content)."""
    from dumpfilter.rules.transaction_filter import is_framing

    total = 0
    for path in binlog_paths(src):
        for unit in group_transactions(read_events(path.read_bytes())):
            if unit.kind == "control":
                continue
            dbs = {e.table_map[1] for e in unit.events if e.type_code == EventType.TABLE_MAP}
            dbs |= {e.db for e in unit.events if e.is_query and not is_framing(e)}
            if "db1" not in dbs:
                total += sum(e.size for e in unit.events if is_framing(e))
    return total


@pytest.mark.spark
def test_experiment_command_writes_csv_parquet_and_chart(spark, workloads, tmp_path):
    topo = tmp_path / "topology.toml"
    topo.write_text(TOPOLOGY)
    src = str(workloads["row-mariadb"])
    assert dumpfilter_main(["experiment", "--binlogs", src, "--topology", str(topo), "--out", str(tmp_path / "c"),
                            "--spark-master", "local[2]", "--chunk-bytes", "20000"]) == 0
    rows = list(csv.DictReader(open(tmp_path / "c" / "bandwidth.csv")))
    assert [r["slave"] for r in rows] == ["everything", "nothing-hb", "db1-ph", "not-db2-empty"]
    assert (tmp_path / "c" / "bandwidth.png").read_bytes()[:4] == b"\x89PNG"
    assert dumpfilter_main(["experiment", "--binlogs", src, "--topology", str(topo), "--out", str(tmp_path / "p"),
                            "--no-spark", "--format", "parquet"]) == 0
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "p" / "bandwidth.parquet").to_pylist()
    assert [(r["slave"], r["bytes_sent"]) for r in table] == [(r["slave"], int(r["bytes_sent"])) for r in rows]


@pytest.mark.parametrize("text, message", [
    ("[[slaves]]\nname = 'a'\n", "<topology>:1: slaves.server_id: missing"),
    ("[[slaves]]\nname = 'a'\nserver_id = 2\n\n[[slaves]]\nname = 'b'\nserver_id = 2\n",
     "<topology>:7: slaves.server_id 2 is already used"),
    ("[[slaves]]\nname = 'a'\nserver_id = 2\nskip_policy = 'x'\n", "<topology>:4: slaves.skip_policy"),
    ("[[slaves]]\nname = 'a'\nserver_id = 2\nrules = ['replicate-do-table=nodot']\n", "<topology>:4: slaves.rules"),
    ("[[slaves]]\nname = 'a'\nserver_id = 2\ncolour = 1\n", "<topology>:4: slaves.colour: unknown key"),
    ("[[slaves]]\nname = 'a'\nserver_id = 2\nchange_replication_filter = \"CHANGE MASTER TO DO='a.%'\"\n",
     "slaves.filter_semantics"),
    ("[[slaves]\n", "not valid TOML"),
    ("slaves = 3\n", "<topology>:1: needs at least one [[slaves]] table"),
])
def test_topology_errors_name_key_and_line(text, message):
    with pytest.raises(TopologyError) as info:
        parse_topology(text)
    assert message in str(info.value)


def test_topology_rules_in_every_syntax():
    topology = parse_topology("""
[master]
binlogs = "x"
[[slaves]]
name = "a"
server_id = 7
rules = ["replicate-do-db=db1", "replicate-do-db=db2"]
change_replication_filter = ["CHANGE REPLICATION FILTER REPLICATE_IGNORE_TABLE = (db1.t1)"]
[[slaves]]
name = "b"
server_id = 8
filter_semantics = "effective"
change_replication_filter = "CHANGE MASTER TO DO='db3.%'"
""")
    a, b = topology.slaves
    assert a.rules.do_db == ("db1", "db2") and a.rules.ignore_table == ("db1.t1",)
    assert b.rules.effective_do == ("db3.%",) and b.settings.semantics == "effective"
    assert topology.master == {"binlogs": "x"}


def test_chart_and_table_give_one_saving_per_slave(tmp_path, monkeypatch):
    """Issue #28: the placeholder slave's chart bar said -18% while the table said 14.4% saved (the
    framing a placeholder stream keeps of a skipped transaction was in neither the kept nor the
    overhead part of the bar). Each bar is now the bytes the table says were sent, labelled with
    the table's saving."""
    from matplotlib.axes import Axes

    from dumpfilter.spark_jobs.bandwidth_experiment import print_table, run_experiment
    from dumpfilter.workload.generator import WorkloadSpec, generate

    src = tmp_path / "src"
    generate(WorkloadSpec(seed=4, schemas=3, transactions=400, binlog_format="mixed"), src)
    labels, heights = [], []  # what the chart draws: each bar's label, each bar's stacked height
    real_bar, real_annotate = Axes.bar, Axes.annotate

    def bar(ax, x, height, *args, bottom=0, **kwargs):
        if bottom:  # the overhead stacked on the kept part: the bar's top
            heights.append(round((bottom + height) * 1e6))
        return real_bar(ax, x, height, *args, bottom=bottom, **kwargs)

    def annotate(ax, text, *args, **kwargs):
        if text.endswith("%"):
            labels.append(text)
        return real_annotate(ax, text, *args, **kwargs)

    monkeypatch.setattr(Axes, "bar", bar)
    monkeypatch.setattr(Axes, "annotate", annotate)
    rows, _ = run_experiment(src, parse_topology(TOPOLOGY), tmp_path / "out")
    table = io.StringIO()
    print_table(rows, table)
    out = table.getvalue()
    printed = {line.split()[0]: line.split()[4] for line in out.splitlines()[1:]}
    assert set(printed) == {r["slave"] for r in rows}, out
    assert len(labels) == len(rows)
    placeholder = next(r for r in rows if r["skip_policy"] == "placeholder" and 0 < r["saving_pct"] < 100)
    for height, row in zip(heights, rows):
        assert abs(height - row["bytes_sent"]) <= 1, (row["slave"], height, row["bytes_sent"])  # MB floats
    for label, row in zip(labels, rows):
        assert printed[row["slave"]] == f"{row['saving_pct']:.1f}%"
        assert label == f"{-row['saving_pct']:+.1f}%", (label, row)
    assert placeholder["kept_bytes"] + placeholder["placeholder_bytes"] == placeholder["bytes_sent"]
