"""`simulate` reports `dumpfilter lint`'s prediction per slave: what `dumpfilter lint` itself says about
the same binlog files with the slave's rules (run as a command, apart from the report code)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dumpfilter.cli.app import main
from dumpfilter.lab.simulate.report import lint_cell

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(240)]


def test_each_slave_row_carries_lints_prediction(default_run, capsys):
    result, _, _ = default_run
    source = result.report["source"]
    files = [str(Path(source["directory"]) / name) for name in source["files"]]
    checked = 0
    for row in result.report["slaves"]:
        assert set(row["lint"]) == {"breaks", "first", "warnings", "diverges", "divergence"}
        if row["semantics"] != "mysql" or not all(r.startswith("replicate-") and ":" not in r for r in row["rules"]):
            continue  # rules the command line spells differently (channels, CHANGE statements)
        capsys.readouterr()
        code = main(["lint", *files, *[f"--{r}" for r in row["rules"]], "--flavor", row["flavor"], "--json"])
        said = json.loads(capsys.readouterr().out)
        breaks = said["breaks"]
        assert code == (1 if breaks else 0)
        assert row["lint"]["breaks"] == len(breaks)
        assert row["lint"]["first"] == (breaks[0] if breaks else None)
        assert row["lint"]["warnings"] == said["warnings"]
        assert row["lint"]["diverges"] == said["divergence"]["writes"]  # the writes it silently gets wrong
        diverges = f"; diverges: {said['divergence']['writes']} writes" if said["divergence"]["writes"] else ""
        assert lint_cell(row) == ("no break" if not breaks else f"{breaks[0]['errno']} at "
                                  f"{breaks[0]['file']}:{breaks[0]['pos']}" + (f" (+{len(breaks) - 1} more)"
                                                                               if len(breaks) > 1 else "")) + diverges
        checked += 1
    assert checked >= 2
