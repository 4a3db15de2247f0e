"""The filters in force for this slave as the master holds them, read back after a live change."""

from __future__ import annotations

import grpc

from dumpfilter.rules.ruleset import REPLICATE_TYPES, filter_name
from dumpfilter.v1 import dump_pb2
from dumpfilter.v1.dump_pb2_grpc import DumpFilterStub

_NAMES = tuple(filter_name(rule_type) for rule_type in REPLICATE_TYPES)


def filters_in_force(stub: DumpFilterStub, server_id: int, channel: str, metadata: list[tuple[str, str]],
                     timeout: float | None) -> dict[str, str] | None:
    """FILTER_NAME -> rule text of `channel`'s rows in the master's ListFilters for this slave
    (performance_schema.replication_applier_filters), every REPLICATE_* name present ("" for none);
    None when the master cannot say (an older master, or one going away).

    A `dumpfilter master change-filter` (CHANGE REPLICATION FILTER run on the master for this slave)
    reaches the slave only as DumpBatch.filter_changed_at, where the change took effect; the rules
    themselves are the master's, so SHOW SLAVE STATUS's Replicate_* fields are read back from it,
    as MySQL's show the filter in force after CHANGE REPLICATION FILTER."""
    try:
        reply = stub.ListFilters(dump_pb2.ListFiltersRequest(server_id=server_id), timeout=timeout,
                                 metadata=metadata)
    except grpc.RpcError:
        return None
    filters = dict.fromkeys(_NAMES, "")
    for row in reply.filters:
        if row.server_id == server_id and row.channel_name == channel and row.filter_name in filters:
            filters[row.filter_name] = row.filter_rule
    return filters
