"""The one error hierarchy (dumpfilter.errors): every error a user can cause is a DumpFilterError
whose class names a real gRPC status; the gRPC face and the CLI map them in one place each."""

from __future__ import annotations

import importlib
import pkgutil

import grpc
import pytest

import dumpfilter
from dumpfilter import errors
from dumpfilter.cli.app import main
from dumpfilter.master.serve.grpc_server import _status_for


def _all_error_classes() -> set[type]:
    for info in pkgutil.walk_packages(dumpfilter.__path__, "dumpfilter."):
        if ".v1" in info.name or info.name.endswith("__main__"):
            continue
        importlib.import_module(info.name)
    for name in ("master", "slave", "lab", "cli", "spark_jobs"):
        package = importlib.import_module(f"dumpfilter.{name}")
        for info in pkgutil.walk_packages(package.__path__, f"dumpfilter.{name}."):
            if "split_by_schema" in info.name or "bandwidth_experiment" in info.name:
                continue  # Spark job entry points: they start a session on import
            importlib.import_module(info.name)
    seen, todo = set(), [errors.DumpFilterError]
    while todo:
        cls = todo.pop()
        seen.add(cls)
        todo.extend(c for c in cls.__subclasses__() if c not in seen)
    return seen


ERRORS = sorted(_all_error_classes(), key=lambda c: f"{c.__module__}.{c.__qualname__}")


def test_the_hierarchy_reaches_every_layer():
    modules = {cls.__module__.split(".")[1] for cls in ERRORS}
    assert {"errors", "lab", "slave", "topology", "cli"} <= modules, modules


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__qualname__)
def test_each_error_names_a_grpc_status_and_maps_to_it(cls):
    code = getattr(grpc.StatusCode, cls.grpc_code)
    exc = cls.__new__(cls)
    Exception.__init__(exc, "the message")
    got, message = _status_for(exc)
    assert got is code
    assert "the message" in message
    if cls.mysql_errno is not None:
        assert message.startswith(f"({cls.mysql_errno}) ")


def test_a_bug_is_internal_not_a_user_error():
    code, message = _status_for(KeyError("x"))
    assert code is grpc.StatusCode.INTERNAL and "KeyError" in message


def test_position_errors_carry_1236_and_rule_errors_are_invalid_arguments():
    assert _status_for(errors.PositionError("purged"))[1] == "(1236) purged"
    assert _status_for(errors.RuleError("bad rule"))[0] is grpc.StatusCode.INVALID_ARGUMENT


def test_a_bad_verify_script_is_one_line_and_exit_2(tmp_path, capsys):
    script = tmp_path / "bad.sql"
    script.write_text("CREATE TABLE t (a INT);\nINSERT INTO t VALUES ('oops);\n")
    assert main(["verify", "--builtin", "--workload", str(script)]) == errors.EXIT_CODE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.sql" in err[0] and "line 2" in err[0] and "Traceback" not in err[0]
