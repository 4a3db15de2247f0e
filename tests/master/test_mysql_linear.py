"""The MySQL endpoint's defences, unit by unit: the comment stripper (the core's lexer; a real
MariaDB is its reference where the old regex read comments wrong), the hand-written alias reader
and LIKE answer what the old regexes answered (they are the reference) on every small input,
and in linear work on the inputs that made the regexes take days; a session's variables are
bounded; reads have deadlines; the admission counts and the rate-limited problem log."""

from __future__ import annotations

import logging
import re
import socket
import threading
import time

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dumpfilter import _core
from dumpfilter.master.endpoint.admission import Admission, EndpointLimits, Refused
from dumpfilter.master.rate_limited_log import ProblemLog
from dumpfilter.master.protocol.packets import PacketStream, PacketTooLarge, ReadTimeout
from dumpfilter.master.endpoint.queries import (
    ER_OUT_OF_RESOURCES,
    ER_TOO_LONG_IDENT,
    QueryError,
    ServerFacts,
    Session,
    _alias,
    _like_matcher,
    _strip_comments,
)

FACTS = ServerFacts(server_id=7, server_uuid="3e11fa47-71ca-11e1-9e33-c80aa9429562", version="10.11.19-MariaDB-log",
                    checksum="CRC32")


# -- the old regexes: the reference semantics -----------------------------------------------------

def _old_strip(text: str) -> str:
    return re.sub(r"/\*.*?\*/", " ", text, flags=re.S)


def _old_alias(expr: str) -> tuple[str, str | None]:
    match = re.fullmatch(r"(.*?)\s+(?:AS\s+)?`?(\w+)`?", expr, re.I | re.S)
    if match and not match.group(1).rstrip().endswith(("(", ",")) and \
            match.group(1).count("(") == match.group(1).count(")") and match.group(1).strip():
        return match.group(1).strip(), match.group(2)
    return expr, None


def _old_like(pattern: str, name: str) -> bool:
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return re.fullmatch("".join(out), name, re.I | re.S) is not None


@given(st.text(alphabet="/* a\n", max_size=40))
@settings(max_examples=400)
def test_comments_are_stripped_as_the_lazy_regex_did(text):
    """Where the old regex read comments right (no quote, `#`, `-- ` or versioned comment), the
    same words are left: a run of comments is one space now, not a space each. A comment left
    open leaves the text as it is (the old regex still took the closed ones before it)."""
    if _core.sql_tokens(text).error is None:
        assert _strip_comments(text).split() == _old_strip(text).split()
    else:
        assert _strip_comments(text) == text


# What a real MariaDB holds after each SET: the comments the old reader missed (a `/*` in a
# string, `#` and `-- ` comments, a versioned comment's code).
_COMMENTED_SETS = ["SET @a = '/* not a comment */'", "SET @b = 1 # a comment", "SET @c = 2 -- a comment",
                   "SET @d /*!100000 = 5 */", "SET @e = /* plain */ 6", "SET @f = 'x' /* a */ /* b */"]


@pytest.mark.mariadb
def test_comments_are_read_as_a_real_mariadb_reads_them(mariadb_factory):
    server = mariadb_factory("comments")
    session = Session(FACTS)
    with server.connect() as conn, conn.cursor() as cur:
        for sql in _COMMENTED_SETS:
            cur.execute(sql)
            session.answer(sql)
            name = sql.split("@")[1].split()[0]
            cur.execute(f"SELECT @{name}")
            held = cur.fetchone()[0]
            assert session.user_var(name) == (held.decode() if isinstance(held, bytes) else str(held)), sql


@given(st.text(alphabet=" \tAaSsx_1`(),é", max_size=24))
@example(" AS 1")  # found by a run: nothing before ` AS word`, so the regex read no alias
@settings(max_examples=600)
def test_aliases_are_read_as_the_regex_did(expr):
    assert _alias(expr) == _old_alias(expr)


@given(st.text(alphabet="%_\\aB.", max_size=10), st.text(alphabet="ab_%\\.", max_size=10))
@settings(max_examples=600)
def test_like_matches_as_the_backtracking_regex_did(pattern, name):
    assert bool(_like_matcher(pattern)(name)) == _old_like(pattern, name)


@pytest.mark.timeout(120)
def test_the_inputs_that_took_days_are_answered():
    """Each input took the old code more than 10^9 regex steps (a 20-`%` LIKE: 3^20 splits; a
    comment or a space run of 200 000: n^2/2). Completing at all is the check."""
    session = Session(FACTS)
    no_rows = 5  # the column count, two column definitions, EOF, (no row), EOF
    assert len(session.answer("SHOW VARIABLES LIKE '" + "%" * 20 + "x'")) == no_rows
    assert len(session.answer("SHOW VARIABLES LIKE '" + "%" * 20 + "_id'")) == no_rows + 3  # server_(uu)id, gtid_domain_id
    assert _strip_comments("SELECT 1 " + "/* " * 200_000).startswith("SELECT 1 /* ")
    assert _alias("x" + " " * 200_000 + "!") == ("x" + " " * 200_000 + "!", None)
    assert _alias("1" + " " * 200_000 + "AS   one") == ("1", "one")
    rows = session.answer("SHOW VARIABLES LIKE '" + "%_" * 200_000 + "'")  # needs more characters than a name has
    assert len(rows) == no_rows


def test_a_session_holds_bounded_variables():
    session = Session(FACTS)
    with pytest.raises(QueryError) as info:
        session.answer("SET @" + "a" * 65 + " = 1")
    assert info.value.code == ER_TOO_LONG_IDENT
    session.answer("SET @big = '" + "x" * 200_000 + "'")
    with pytest.raises(QueryError) as info:
        session.answer("SET @other = '" + "x" * 100_000 + "'")
    assert info.value.code == ER_OUT_OF_RESOURCES
    session.answer("SET @big = 'small', @other = '" + "x" * 100_000 + "'")  # replacing a value frees its bytes
    assert session.user_var("other") == "x" * 100_000


def test_a_read_has_a_deadline_however_slowly_bytes_come():
    a, b = socket.socketpair()
    stop = threading.Event()

    def trickle() -> None:  # a packet header announcing 100 bytes, then one byte at a time
        try:
            a.sendall(b"\x64\x00\x00\x01")
            while not stop.wait(0.05):
                a.sendall(b"x")
        except OSError:
            pass

    thread = threading.Thread(target=trickle)
    thread.start()
    try:
        with pytest.raises(ReadTimeout):
            PacketStream(b).read(deadline=time.monotonic() + 0.5)
    finally:
        stop.set()
        thread.join()
        a.close()
        b.close()


def test_an_oversized_command_is_its_own_error():
    a, b = socket.socketpair()
    try:
        a.sendall(b"\x00\x00\x20\x00")  # 2 MiB announced
        with pytest.raises(PacketTooLarge):
            PacketStream(b).read(limit=1 << 20)
    finally:
        a.close()
        b.close()


# -- admission ------------------------------------------------------------------------------------

def test_handshakes_are_capped_per_address_and_in_all_with_the_busiest_address_making_room():
    admission = Admission(EndpointLimits(max_handshakes=4, max_handshakes_per_host=3, max_connections=2))
    closed: list[str] = []
    closers = {}
    for i in range(3):
        closers[f"a{i}"] = lambda i=i: closed.append(f"a{i}")
        admission.enter_handshake("10.0.0.1", closers[f"a{i}"])
    # An address at its cap: its own oldest unfinished handshake makes room (an attacker's trickle
    # from a replica's address cannot lock the replica out).
    closers["a3"] = lambda: closed.append("a3")
    assert admission.enter_handshake("10.0.0.1", closers["a3"]) == "10.0.0.1"
    assert closed == ["a0"]
    assert admission.enter_handshake("10.0.0.2", lambda: closed.append("b0")) is None  # the fourth: room left
    assert admission.enter_handshake("10.0.0.3", lambda: closed.append("c0")) == "10.0.0.1"  # full: its oldest goes
    assert closed == ["a0", "a1"]
    with pytest.raises(Refused, match="have not finished"):              # as busy as the busiest: refused
        admission.enter_handshake("10.0.0.1", lambda: None)
    admission.leave_handshake("10.0.0.1", closers["a0"])                 # an evicted socket's own leave: no-op
    admission.leave_handshake("10.0.0.1", closers["a2"])
    assert admission.enter_handshake("10.0.0.1", lambda: None) is None   # room again
    assert admission.enter_handshake("10.0.0.4", lambda: None) == "10.0.0.1"  # a new address always gets in
    assert closed == ["a0", "a1", "a3"]
    first = admission.session(None)
    first.__enter__()
    with admission.session(None):
        with pytest.raises(Refused, match="Too many connections"):
            with admission.session(None):
                pass
    first.__exit__(None, None, None)
    with admission.session(None), admission.session(None):   # both places were given back
        assert admission.sessions == 2
    assert admission.sessions == 0


def test_an_identity_holds_at_most_its_share_of_the_sessions(tmp_path):
    """MySQL's max_user_connections: one identity cannot take every session of the endpoint; its
    share is max_connections over the policy's sections, or its own `max_sessions`; [default]'s
    users are one account."""
    from dumpfilter.master.endpoint.admission import ER_TOO_MANY_USER_CONNECTIONS
    from dumpfilter.master.policy import MasterPolicy

    policy_file = tmp_path / "policy.toml"
    policy_file.write_text('[slave.a]\npassword = "x"\nallow = ["%.%"]\n\n[slave.b]\npassword = "y"\n'
                           'allow = ["%.%"]\nmax_sessions = 1\n\n[default]\nallow = ["s.%"]\n')
    policy = MasterPolicy.load(policy_file)
    admission = Admission(EndpointLimits(max_connections=6), policy)   # three sections: a share of 2
    a, b = policy.authenticate("a", "x"), policy.authenticate("b", "y")
    anyone, someone = policy.authenticate("anyone", ""), policy.authenticate("someone", "")
    with admission.session(a), admission.session(a):
        with pytest.raises(Refused) as refused:
            with admission.session(a):
                pass
        assert refused.value.errno == ER_TOO_MANY_USER_CONNECTIONS and "'a'" in str(refused.value)
        with admission.session(b):                                    # its own max_sessions = 1
            with pytest.raises(Refused, match="max_sessions"):
                with admission.session(b):
                    pass
        with admission.session(anyone), admission.session(someone):   # [default]: one account of 2
            with pytest.raises(Refused, match="max_user_connections"):
                with admission.session(policy.authenticate("third", "")):
                    pass
    assert admission.sessions == 0
    with admission.session(a), admission.session(a):                  # every place was given back
        pass


def test_limits_are_checked():
    for bad in ({"connect_timeout": 0}, {"wait_timeout": -1}, {"max_connections": 0}, {"max_packet": 10}):
        with pytest.raises(Exception, match="--mysql-"):
            EndpointLimits(**bad)


def test_the_problem_log_is_rate_limited_and_counts_what_it_left_out(caplog):
    now = [0.0]
    logger = logging.getLogger("dumpfilter.test.problems")
    logins = ProblemLog(logger, "failed logins", burst=3, every=10.0, clock=lambda: now[0])
    refused = ProblemLog(logger, "refused or broken connections", burst=3, every=10.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="dumpfilter.test.problems"):
        for i in range(50):
            refused.warning("refused %d", i)
        for i in range(10):
            logins.warning("login %d", i)
        now[0] += 10.0
        logins.warning("login again")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["refused 0", "refused 1", "refused 2", "login 0", "login 1", "login 2",
                        "login again (7 more failed logins not logged before this one)"]
    assert all(r.levelno == logging.WARNING for r in caplog.records)
    assert logins.count == 11 and refused.count == 50
