"""Conversions between the protobuf contract (dumpfilter.v1) and rule-set values, shared by the
master's servicer and the slave client."""

from __future__ import annotations



from dumpfilter.errors import RuleError
from dumpfilter.v1 import dump_pb2
from dumpfilter.rules.ruleset import PAIR_TYPES, RuleSet


def _type_name(enum_value: int) -> str:
    name = dump_pb2.FilterType.Name(enum_value)
    return name.removeprefix("REPLICATE_").lower()


def rules_from_proto(rule_list) -> RuleSet:
    values: dict[str, list] = {}
    for rule in rule_list.rules:
        if rule.type == dump_pb2.FILTER_TYPE_UNSPECIFIED:
            raise RuleError(f"filter rule {rule.value!r} has no type")
        if rule.type not in dump_pb2.FilterType.values():  # proto3 keeps unknown enum numbers
            raise RuleError(f"filter rule {rule.value!r}: FilterRule.type {rule.type} is not a known FilterType")
        rule_type = _type_name(rule.type)
        value = (rule.value, rule.to) if rule_type in PAIR_TYPES else rule.value
        values.setdefault(rule_type, []).append(value)
    return RuleSet(**{t: tuple(v) for t, v in values.items()})


def rules_to_proto(rules: RuleSet) -> dump_pb2.RuleList:
    """Every rule type travels: a type the contract could not carry would be dropped without a word."""
    out = dump_pb2.RuleList()
    for enum_value in dump_pb2.FilterType.values():
        if enum_value == dump_pb2.FILTER_TYPE_UNSPECIFIED:
            continue
        rule_type = _type_name(enum_value)
        for value in getattr(rules, rule_type):
            if rule_type in PAIR_TYPES:
                out.rules.add(type=enum_value, value=value[0], to=value[1])
            else:
                out.rules.add(type=enum_value, value=value)
    return out
