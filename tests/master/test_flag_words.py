"""The master's flag words live in the compiled core (#11): a miss asks the Python rule engines
once per table and generation, bit tests and a segment's keep bytes are answered from the cached
word, words go past 64 slaves, and a word computed across an invalidation is not kept."""

from __future__ import annotations

import threading
import time

from dumpfilter import _core
from dumpfilter.master.decide.flags import FlagWords
from dumpfilter.rules.gate import Gate
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import RuleSet


def _members(*rule_sets: RuleSet, bits=None):
    gate = Gate()
    members = [(bit, RuleEngine(rules), gate) for bit, rules in zip(bits or range(len(rule_sets)), rule_sets)]
    return lambda: members


def test_a_miss_asks_the_engines_once_and_every_answer_comes_from_the_word():
    words = FlagWords(_members(RuleSet(do_db=("db1",)), RuleSet(ignore_db=("db1",)), RuleSet(), bits=(0, 3, 700)))
    assert [b for b in range(702) if words.kept("db1", "t", b)] == [0, 700]  # the whole word
    assert [b for b in range(702) if words.kept("db2", "t", b)] == [3, 700]
    assert [words.kept("db1", "t", b) for b in (0, 3, 700, 701)] == [True, False, True, False]
    assert words.keep([("db1", "t"), ("db2", "t"), ("db3", "x")], 3) == b"\x00\x01\x01"
    assert words.computed == 3  # db1.t, db2.t, db3.x: once each, whatever was asked after


def test_invalidation_starts_a_new_generation_and_drops_a_word_computed_across_it():
    calls = []
    words = _core.FlagWords(lambda db, table: (calls.append((db, table)), b"\x01")[1])
    assert words.kept("d", "t", 0) and words.generation == 0 and len(words) == 1
    words.invalidate()
    assert len(words) == 0 and words.generation == 1
    assert words.kept("d", "t", 0) and calls == [("d", "t")] * 2

    def racing(db, table):  # the rules change while the old rules' word is computed
        late.invalidate()
        return b"\x01"

    late = _core.FlagWords(racing)
    assert late.kept("d", "t", 0)  # answered ...
    assert len(late) == 0 and late.computed == 0  # ... but not kept: it belongs to the old generation


def test_threads_share_the_words_while_python_computes():
    def slow(db, table):
        time.sleep(0.0005)  # lets other threads in while the core waits for the engines
        return (1 << int(table[1:]) % 70).to_bytes(9, "little")

    words = _core.FlagWords(slow)
    errors = []

    def work(seed):
        try:
            for i in range(400):
                table = f"t{(i * 7 + seed) % 97}"
                assert words.kept("d", table, int(table[1:]) % 70)
                if i % 150 == 0:
                    words.invalidate()
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
