"""The shadow candidates' gRPC face: AddShadow, RemoveShadow, ListShadows and ShadowReport requests
answered from a ShadowBoard (the servicer authenticates the caller and maps errors to status codes),
and a candidate as a ShadowCandidate message (ListShadows and Stats)."""

from __future__ import annotations

import json
from typing import Any

from dumpfilter.errors import DumpFilterError, InvalidArgumentError
from dumpfilter.master.policy import Identity
from dumpfilter.master.shadow.board import CandidateStatus, ShadowBoard, require_admin
from dumpfilter.topology import parse_topology
from dumpfilter.v1 import dump_pb2

MAX_CANDIDATES_TEXT = 1 << 20  # an AddShadow request's candidates file, at most


class NoShadowError(DumpFilterError):
    """This master was started without the shadow counting (an in-process master)."""


def _board(board: ShadowBoard | None) -> ShadowBoard:
    if board is None:
        raise NoShadowError("this master counts no shadow candidates (started without them)")
    return board


def add(board: ShadowBoard | None, request: dump_pb2.AddShadowRequest, caller: Identity | None
        ) -> dump_pb2.AddShadowReply:
    board = _board(board)
    require_admin(caller, "add shadow candidates")  # before the text is read: a non-admin learns nothing of it
    if len(request.candidates) > MAX_CANDIDATES_TEXT:
        raise InvalidArgumentError(f"the candidates file is over {MAX_CANDIDATES_TEXT} characters")
    names = board.add(parse_topology(request.candidates, "candidates", server_id_needed=False), caller)
    start = next((s.start for s in board.statuses(caller) if s.name == names[0]), ("", 0))
    return dump_pb2.AddShadowReply(names=names, start=dump_pb2.Position(file=start[0], pos=start[1]))


def remove(board: ShadowBoard | None, request: dump_pb2.RemoveShadowRequest, caller: Identity | None
           ) -> dump_pb2.RemoveShadowReply:
    _board(board).remove(request.name, caller)
    return dump_pb2.RemoveShadowReply()


def listed(board: ShadowBoard | None, caller: Identity | None) -> list[dump_pb2.ShadowCandidate]:
    """Every candidate `caller` may see (an admin: all; anyone else: none)."""
    return [] if board is None else [candidate_message(s) for s in board.statuses(caller)]


def list_shadows(board: ShadowBoard | None, caller: Identity | None) -> dump_pb2.ListShadowsReply:
    require_admin(caller, "list shadow candidates")
    return dump_pb2.ListShadowsReply(candidates=listed(board, caller))


def report(board: ShadowBoard | None, caller: Identity | None) -> dump_pb2.ShadowReportReply:
    rows = _board(board).report(caller)

    def made(items: list[dict[str, Any]]) -> list[dump_pb2.ReportRow]:
        return [dump_pb2.ReportRow(cells={k: json.dumps(v) for k, v in row.items()}) for row in items]

    return dump_pb2.ShadowReportReply(candidates=made(rows["candidates"]), bandwidth=made(rows["bandwidth"]),
                                      by_hour=made(rows["by_hour"]), by_table=made(rows["by_table"]))


def candidate_message(s: CandidateStatus) -> dump_pb2.ShadowCandidate:
    out = dump_pb2.ShadowCandidate(name=s.name, skip_policy=s.skip_policy, rules=list(s.rules),
                                   added_by=s.added_by, start=dump_pb2.Position(file=s.start[0], pos=s.start[1]),
                                   state=s.state, note=s.note, counts=s.counts, lint_state=s.lint_state,
                                   lint=s.lint_line, lint_breaks=s.lint_breaks, diverges=s.diverges)
    if s.counted_to is not None:
        out.counted_to.CopyFrom(dump_pb2.Position(file=s.counted_to[0], pos=s.counted_to[1]))
    return out
