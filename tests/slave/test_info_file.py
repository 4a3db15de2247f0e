"""relay-log.info's text (slave.info_file): any fields round-trip through info_text and
parse_info; any one byte changed, or any version cut short, is refused or gives the same fields,
never other values (a check over a text written in place, see info_text). A change in the
check's own name leaves a text without a check, read as one written before checks: its fields
are the version's, whole."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dumpfilter.slave.info_file import info_text, parse_info

# (No 5-character names: the check's, one byte changed, would be a field's name too.)
fields = st.dictionaries(st.text(min_size=1, max_size=12).filter(lambda k: len(k) != 5),
                         st.one_of(st.integers(), st.text(max_size=40), st.booleans(), st.floats(allow_nan=False),
                                   st.dictionaries(st.text(max_size=8), st.integers(), max_size=3)),
                         min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(fields)
def test_fields_round_trip(data):
    data.pop("check", None)
    if not data:
        return
    assert parse_info(info_text(data)) == data
    assert parse_info(info_text(data) + b" " * 7) == data  # padded over a longer version


@settings(max_examples=300, deadline=None)
@given(fields, st.data())
def test_a_changed_byte_or_a_cut_is_refused(data, draw):
    data.pop("check", None)
    if not data:
        return
    text = info_text(data)
    at = draw.draw(st.integers(0, len(text) - 1))
    changed = bytearray(text)
    changed[at] ^= draw.draw(st.integers(1, 255))
    try:
        got = parse_info(bytes(changed))
    except (ValueError, UnicodeDecodeError):
        pass
    else:  # only a change to the check's name: the same fields, and that name's entry
        assert at < len(b'{"check"') and {k: v for k, v in got.items() if k in data} == data
        assert len(got) == len(data) + 1
    with pytest.raises((ValueError, UnicodeDecodeError)):
        parse_info(text[:at])
