"""Conversions between the protobuf contract (dumpfilter.v1) and rule-set, skip-policy and schema
values, shared by the master's servicer and the slave client; and the TLS files either end reads
(with what is wrong with a certificate's dates), with the client channel to the master (the
slave's and the operator commands')."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from dumpfilter.errors import InvalidArgumentError, RuleError
from dumpfilter.v1 import dump_pb2
from dumpfilter.rules.ruleset import PAIR_TYPES, RuleSet
from dumpfilter import skip_policy

MAX_SCHEMA_TABLES = 100_000  # a ReplicaSchema's bound (its tables, and its databases)
MAX_COLUMNS = 4096           # columns of a table (InnoDB's limit is lower, MySQL's hard one this)
NAME_MAX = 64                # an identifier's characters (MySQL and MariaDB)
# Call metadata carrying the policy identity on every RPC (RegisterRequest.credentials is also read
# by Register, for older slaves). Under mTLS the client certificate's CN is the identity.
USER_KEY, PASSWORD_KEY = "dumpfilter-user", "dumpfilter-password"

if TYPE_CHECKING:  # loaded when a schema travels, not with the slave client
    import grpc

    from dumpfilter.rules.schema import SchemaModel


def _type_name(enum_value: int) -> str:
    return dump_pb2.FilterType.Name(enum_value).removeprefix("REPLICATE_").lower()


def rules_from_proto(rule_list: dump_pb2.RuleList) -> RuleSet:
    values: dict[str, list[Any]] = {}  # by rule type: names, or (from, to) pairs (PAIR_TYPES)
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
            name, to = value if rule_type in PAIR_TYPES else (value, "")
            out.rules.add(type=enum_value, value=name, to=to)
    return out


def skip_policy_from_proto(value: int) -> str:
    """A SkipPolicy number as a policy's name (SKIP_POLICY_EMPTY_TRANSACTION: the policy
    `empty-transaction`; unspecified: the default); InvalidArgumentError for a number the
    contract does not know (proto3 keeps them)."""
    if value == dump_pb2.SKIP_POLICY_UNSPECIFIED:
        return skip_policy.DEFAULT
    if value not in dump_pb2.SkipPolicy.values():
        raise InvalidArgumentError(f"skip_policy {value} is not a known SkipPolicy")
    name = dump_pb2.SkipPolicy.Name(value).removeprefix("SKIP_POLICY_").lower().replace("_", "-")
    return skip_policy.named(name).name


def skip_policy_to_proto(name: str) -> dump_pb2.SkipPolicy:
    """A policy's name as its SkipPolicy number."""
    # (the stubs type EnumTypeWrapper.Value as a plain int; the number is one of SkipPolicy's)
    number = dump_pb2.SkipPolicy.Value("SKIP_POLICY_" + skip_policy.named(name).name.upper().replace("-", "_"))
    return cast("dump_pb2.SkipPolicy", number)


def schema_to_proto(model: SchemaModel) -> dump_pb2.ReplicaSchema:
    """A replica's starting schema for Register: its databases and tables (columns in order)."""
    out = dump_pb2.ReplicaSchema(databases=sorted(model.databases))
    for (db, table), columns in sorted(model.tables.items()):
        out.tables.add(db=db, name=table, columns=list(columns or ()))
    return out


def schema_from_proto(message: dump_pb2.ReplicaSchema, field: str = "replica_schema") -> SchemaModel:
    """A ReplicaSchema as a schema model; a field out of bounds is an InvalidArgumentError naming it."""
    if len(message.databases) > MAX_SCHEMA_TABLES or len(message.tables) > MAX_SCHEMA_TABLES:
        raise InvalidArgumentError(f"{field}: more than {MAX_SCHEMA_TABLES} databases or tables")

    def name(value: str, where: str) -> str:
        if not value or len(value) > NAME_MAX or "\0" in value:
            raise InvalidArgumentError(f"{field}.{where}: {value[:80]!r} is not a name of 1 to {NAME_MAX} "
                                       "characters")
        return value

    databases = {name(db, f"databases[{i}]") for i, db in enumerate(message.databases)}
    tables: dict[tuple[str, str], tuple[str, ...] | None] = {}
    for i, table in enumerate(message.tables):
        key = (name(table.db, f"tables[{i}].db"), name(table.name, f"tables[{i}].name"))
        if len(table.columns) > MAX_COLUMNS:
            raise InvalidArgumentError(f"{field}.tables[{i}].columns: more than {MAX_COLUMNS} columns")
        columns = tuple(name(c, f"tables[{i}].columns[{j}]") for j, c in enumerate(table.columns))
        tables[key] = columns or None
        databases.add(key[0])
    from dumpfilter.rules.schema import SchemaModel

    return SchemaModel.from_tables(databases, tables, "the replica's schema (Register)")


def read_pem(path: str | Path, option: str, error: type[InvalidArgumentError] = InvalidArgumentError) -> bytes:
    """The TLS file (PEM) `option` names; where it cannot be read, `error` names the option and the file."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise error(f"{option} {path}: {exc.strerror or exc}") from None


def credentials(user: str, password: str) -> list[tuple[str, str]]:
    """The call metadata naming `user` and its password (none without a user)."""
    return [(USER_KEY, user), (PASSWORD_KEY, password)] if user else []


def client_channel(target: str, options: list[tuple[str, Any]], ssl_ca: str | Path | None = None,
                   ssl_cert: str | Path | None = None, ssl_key: str | Path | None = None, *,
                   error: type[InvalidArgumentError] = InvalidArgumentError) -> grpc.Channel:
    """A channel to the master at `target`: TLS with --ssl-ca, mTLS with --ssl-cert and --ssl-key
    (which go together), plaintext without them."""
    import grpc

    if not (ssl_ca or ssl_cert or ssl_key):
        return grpc.insecure_channel(target, options=options)
    if bool(ssl_cert) != bool(ssl_key):
        raise error("--ssl-cert and --ssl-key go together")
    pems = [read_pem(path, option, error) if path else None
            for path, option in ((ssl_ca, "--ssl-ca"), (ssl_key, "--ssl-key"), (ssl_cert, "--ssl-cert"))]
    return grpc.secure_channel(target, grpc.ssl_channel_credentials(*pems), options=options)


def certificate_date_problems(pem: bytes, now: datetime.datetime | None = None) -> list[str]:
    """What is wrong with the dates of the server certificate (the chain's first) in `pem`: expired,
    or not valid yet. The master starts all the same (a certificate is renewed in place, and the
    operator may mean it), but says so: every client that verifies it will refuse the connection,
    MariaDB replicas with MASTER_SSL_VERIFY_SERVER_CERT among them."""
    from cryptography import x509

    try:
        cert = x509.load_pem_x509_certificate(pem)
    except ValueError:
        return []  # grpc says what is wrong with a certificate it cannot read
    now = now or datetime.datetime.now(datetime.UTC)
    if cert.not_valid_after_utc < now:
        days = (now - cert.not_valid_after_utc).days
        return [f"the certificate expired on {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC ({days} day(s) ago): "
                "clients that verify it refuse to connect"]
    if cert.not_valid_before_utc > now:
        return [f"the certificate is not valid before {cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC: clients that "
                "verify it refuse to connect until then"]
    return []
