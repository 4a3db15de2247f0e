"""A lower_case_table_names=1 replica's names: it lower-cases every database and table name it is
sent (set_thd_db, Table_map_log_event::do_apply_event, the parser's table names: BUG#37656, MariaDB's
rpl_row_lcase_tblnames / rpl_stm_lcase_tblnames) and holds them so. `lint` keeps the replica's side of
its replay in these names: a master's `BUG_37656.T1` is `bug_37656.t1` there."""

from __future__ import annotations

from dataclasses import replace

from dumpfilter.rules.decisions import lower_tables
from dumpfilter.rules.schema import SchemaModel, Trigger
from dumpfilter.rules.statement_info import StatementInfo, TableRef


def folded_ref(ref: TableRef) -> TableRef:
    return (ref[0].lower(), ref[1].lower())


def folded_info(info: StatementInfo) -> StatementInfo:
    """A statement's tables and database statement's name, lower-cased (`lower_tables`), a
    trigger's database too but not its name."""
    trigger = info.trigger
    return replace(lower_tables(info), trigger=(trigger[0].lower(), trigger[1]) if trigger else trigger)


def folded_schema(model: SchemaModel) -> SchemaModel:
    """A copy of `model` with every database and table name lower-cased (a replica's starting schema)."""
    triggers = {(key[0].lower(), key[1]): Trigger(trig.db.lower(), trig.name, folded_ref(trig.table), trig.timing,
                                                  trig.event, None if trig.writes is None else
                                                  tuple((folded_ref(t), e) for t, e in trig.writes))
                for key, trig in model.triggers.items()}
    return SchemaModel({db.lower() for db in model.databases}, triggers, model.source,
                       views={folded_ref(key) for key in model.views},
                       view_reads={folded_ref(key): tuple(map(folded_ref, read)) for key, read in model.view_reads.items()},
                       functions={(key[0].lower(), key[1]): None if writes is None else
                                  tuple((folded_ref(t), e) for t, e in writes) for key, writes in model.functions.items()},
                       _columns={folded_ref(key): cols for key, cols in model.tables.items()})
