"""The generator's own refusals: a spec it cannot write is a ValueError when it is made (rows of
none crashed in `statement_sql`; a server_id past 32 bits in the event header's packing)."""

from __future__ import annotations

import pytest

from dumpfilter.workload import WorkloadSpec


@pytest.mark.parametrize("options, words", [
    ({"rows_per_statement": 0}, "rows_per_statement must be at least 1, not 0"),
    ({"rows_per_statement": -5}, "rows_per_statement must be at least 1, not -5"),
    ({"server_id": -1}, "server_id must be in 0..4294967295, not -1"),
    ({"server_id": 1 << 32}, "server_id must be in 0..4294967295, not 4294967296"),
])
def test_a_spec_the_generator_cannot_write_is_refused(options, words):
    with pytest.raises(ValueError, match=words):
        WorkloadSpec(**options)
