"""Regular expressions compiled on first use, not at import: the rule modules hold some forty
patterns (the SQL lexer's alone takes 6 ms to compile), and a command that never parses a
statement of their kind (`--help`, a ROW stream with a few DDL) need not pay for them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, AnyStr, Generic


class LazyPattern(Generic[AnyStr]):
    """Stands in for `re.compile(pattern, flags)`: the first attribute asked for (`match`,
    `search`, `sub`, `pattern`...) compiles it, and each attribute is then kept on the instance,
    so that later look-ups cost what they cost on the compiled pattern itself."""

    made: list[LazyPattern[Any]] = []  # every one made (module constants: a bounded number), see compile_all

    def __init__(self, pattern: AnyStr, flags: int = 0) -> None:
        self._source: tuple[AnyStr, int] = (pattern, flags)
        LazyPattern.made.append(self)

    if TYPE_CHECKING:  # what the rule modules use, typed as re.Pattern's (at run time: __getattr__, any attribute)
        def match(self, string: AnyStr, pos: int = 0, endpos: int = ...) -> re.Match[AnyStr] | None: ...
        def search(self, string: AnyStr, pos: int = 0, endpos: int = ...) -> re.Match[AnyStr] | None: ...
        def sub(self, repl: AnyStr | Callable[[re.Match[AnyStr]], AnyStr], string: AnyStr,
                count: int = 0) -> AnyStr: ...

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy, pickle and friends probe dunders: not the pattern's
            raise AttributeError(name)
        compiled = self.compiled
        value = getattr(compiled, name)
        self.__dict__[name] = value
        return value

    @property
    def compiled(self) -> re.Pattern[AnyStr]:
        """The compiled pattern (compiled now if it was not yet)."""
        compiled: re.Pattern[AnyStr] | None = self.__dict__.get("_compiled")
        if compiled is None:
            compiled = self.__dict__["_compiled"] = re.compile(*self._source)
        return compiled

    @property
    def is_compiled(self) -> bool:
        return "_compiled" in self.__dict__

    def __repr__(self) -> str:
        return f"LazyPattern({self._source[0]!r}, {self._source[1]!r})"


def compile_all() -> int:
    """Compiles every pattern made so far that is not compiled yet (a long-running master does it
    once at start, off its first client's path); returns how many it compiled."""
    todo = [p for p in LazyPattern.made if not p.is_compiled]
    return len([pattern.compiled for pattern in todo])

