"""sqlglot, imported on first use: the token-level fast paths decide most statements (all DDL and DML
of a ROW binlog) without a real parser, so a `dumpfilter filter` run need not pay sqlglot's import."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any


class _LazyModule:
    """Stands in for a module until an attribute is asked for, then imports it."""

    def __init__(self, name: str):
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
            import logging  # with sqlglot (which imports it too), not at every command's start

            logging.getLogger("sqlglot").setLevel(logging.ERROR)  # unsupported syntax is reported through parse_ok
        return getattr(module, attr)


__all__ = ["exp", "sqlglot"]

if TYPE_CHECKING:  # the checker reads sqlglot's own types; at run time the stand-ins import it
    import sqlglot
    from sqlglot import expressions as exp
else:
    sqlglot = _LazyModule("sqlglot")
    exp = _LazyModule("sqlglot.expressions")
