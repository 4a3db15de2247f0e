"""What lint says of the rules themselves, before any binlog: a table rule that can match no table.

mysqld accepts `replicate-wild-do-table=db.` and `replicate-do-table=db.` (a dot is all it asks for,
rpl_filter.cc), but no table has an empty name: such a rule keeps (or ignores) no table, and a
replica whose only do rule it is gets nothing but DATABASE statements (`db.` is the key
Rpl_filter::db_ok_with_wild_table matches them by). Its stream then looks like a perfect saving with
no break predicted, so lint names the rule and the pattern that was probably meant.
"""

from __future__ import annotations

from dumpfilter.rules.ruleset import RuleSet, option_name

# The table rules whose key is db + "." + table: an empty side can match no real table.
_CHECKED = ("do_table", "ignore_table", "wild_do_table", "wild_ignore_table")
KEEPS_NO_TABLE = "keeps no table"


def _meant(value: str) -> str | None:
    """The pattern a rule with an empty db or table side probably meant (`db.` -> `db.%`), or None
    when both sides name something."""
    db, _, table = value.partition(".")
    if db and table:
        return None
    return f"{db or '%'}.{table or '%'}"


def rule_warnings(rules: RuleSet) -> list[str]:
    """One line per table rule that can match no table, with the pattern it probably meant:
    "replicate-wild-do-table=db. keeps no table: did you mean `db.%`?"."""
    out = []
    for rule_type in _CHECKED:
        for value in getattr(rules, rule_type):
            meant = _meant(value)
            if meant is None:
                continue
            verb = KEEPS_NO_TABLE if "do" in rule_type else "ignores no table"
            # do/ignore-table take no wildcards: the meant pattern is a wild rule's
            hint = f"`{meant}`" if rule_type.startswith("wild") else \
                f"`{option_name('wild_' + rule_type)}={meant}`"
            out.append(f"{option_name(rule_type)}={value} {verb}: did you mean {hint}?")
    return out
