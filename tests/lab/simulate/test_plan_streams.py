"""simulate's extra streams (the everything stream, each slave's other skip policies) take
server_ids no slave of the topology has, whatever ids the slaves hold: 4294967295 among them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dumpfilter.lab.simulate.orchestration import plan_streams
from dumpfilter.topology import parse_topology

pytestmark = pytest.mark.timeout(120)


def _topology(ids: list[int]) -> str:
    slaves = "".join(f'\n[[slaves]]\nname = "s{k}"\nserver_id = {sid}\nrules = ["replicate-do-db=db1"]\n'
                     for k, sid in enumerate(ids))
    return ('[master.workload]\nseed = 3\nschemas = 2\ntransactions = 10\n' + slaves
            + '\n[experiment]\nskip_policies = ["heartbeat", "placeholder", "empty-transaction"]\n')


@settings(max_examples=60, deadline=None)
@given(st.sets(st.one_of(st.integers(1, 0xFFFFFFFF), st.integers(0xFFFFFFF0, 0xFFFFFFFF)), min_size=1, max_size=4))
def test_extra_streams_get_ids_no_slave_has(tmp_path_factory, ids):
    topology = parse_topology(_topology(sorted(ids)))
    plans = plan_streams(topology, tmp_path_factory.mktemp("relay"), everything=True)
    got = [p.server_id for p in plans]
    assert len(got) == len(set(got)), got  # every stream its own id
    assert all(1 <= sid <= 0xFFFFFFFF for sid in got), got
    assert len(plans) == 1 + 3 * len(ids)  # the everything stream, each slave under each policy
    assert set(got) >= ids


def test_a_slave_at_the_highest_id_leaves_the_extra_streams_the_lowest(tmp_path):
    # (the search for an id past the highest never ended: simulate hung)
    plans = plan_streams(parse_topology(_topology([0xFFFFFFFF])), tmp_path, everything=True)
    assert sorted(p.server_id for p in plans) == [1, 2, 3, 0xFFFFFFFF]
