"""What `rules.lint` reports and reads: a break (`Break`, where a replica with these rules stops, and
its `Cause`, the skipped event that left the replica without the object), and a Query's verdict
(`Verdict`: the Linter's reading of one statement against its state, before it acts on it, which
stands for every statement of a statement key while the state holds: `Linter.key_verdict`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from dumpfilter.errors import one_line
from dumpfilter.rules.decisions import Decision
from dumpfilter.rules.statement_info import StatementInfo


@dataclass(frozen=True)
class Cause:
    """The skipped event that left the replica without the object: its file, position and deciding rule.
    `file`/`pos` are None when the object was absent from (or, for 1007/1050, in) the replica's
    starting schema (--schema, or --replica-schema when the replica's differs from the master's)."""

    file: str | None
    pos: int | None
    rule: str
    reason: str = ""


@dataclass(frozen=True)
class Break:
    """Where a replica with these rules stops: `pos` is the start of the failing transaction (what
    Exec_Master_Log_Pos shows once the SQL thread has stopped on it)."""

    file: str
    pos: int
    gtid: str | None
    errno: int
    message: str
    cause: Cause | None
    event_pos: int = 0
    statement: str = ""

    def to_json(self) -> dict[str, object]:
        return asdict(self)  # (its cause's fields too, in a dict of their own)

    def __str__(self) -> str:
        where = f"{self.file}:{self.pos}" + (f" (GTID {self.gtid})" if self.gtid else "")
        text = f"{where}: error {self.errno}: {self.message}"
        if self.statement:
            text += f"\n  statement: {one_line(self.statement, 160)}"
        if self.cause is not None:
            at = f"{self.cause.file}:{self.cause.pos}" if self.cause.file else "the starting schema"
            text += f"\n  cause: {at}: {self.cause.reason or self.cause.rule}"
        return text


@dataclass(frozen=True)
class Verdict:
    """The Linter's reading of one Query (`Linter._read`): the rules' decision, the default database
    the replica's applier uses and the statement's tables on each side, and, for a statement the
    replica applies, the error it stops with (errno, message, cause; None: it runs). `notes`:
    whether the divergence check may count it (`Divergence.note`; False only where known not to:
    `Linter.key_verdict`). `columns`: a kept INSERT/REPLACE key whose statements `_insert_shape`
    holds one by one to the replica's columns (those columns, whether a list-less INSERT's count
    matches: `binlogs.lint_keyed.insert_passes`); its `problem` is then each statement's own."""

    decision: Decision
    replica_db: str
    primary: StatementInfo
    replica: StatementInfo
    problem: tuple[int, str, Cause | None] | None
    notes: bool = True
    columns: tuple[tuple[str, ...], bool] | None = None

    @property
    def quiet(self) -> bool:
        """Neither a break nor a divergence: what the Linter does with it leaves nothing (for the
        statements `Linter.key_verdict` answers, which change no state)."""
        return self.problem is None and not self.notes and self.columns is None
