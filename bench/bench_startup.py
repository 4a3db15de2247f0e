"""Commands start at once (issue #59 goal 2; `python -m bench startup`): `dumpfilter --version`
and `dumpfilter filter --help`, each the installed console script in a process of its own,
against a bare `python -c pass` of the same venv, interleaved round after round (best of 25 each),
so the ratio compares runs made under the same load. The import set behind it is guarded by
tests/cli/test_startup_imports.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.bench_filter import interleaved
from bench.common import write_result

GOAL = 2.5  # each command at most 2.5x a bare interpreter's start


def _runner(argv: list[str]):
    return lambda: subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)


def main() -> dict:
    python = sys.executable
    script = str(Path(python).with_name("dumpfilter"))
    best = interleaved({"bare": _runner([python, "-c", "pass"]), "version": _runner([script, "--version"]),
                        "filter_help": _runner([script, "filter", "--help"])}, rounds=25)
    bare = best["bare"][0]
    result = {"bare_s": round(bare, 4), **{f"{name}_s": round(best[name][0], 4) for name in ("version", "filter_help")},
              **{f"{name}_ratio": round(best[name][0] / bare, 2) for name in ("version", "filter_help")}, "goal": GOAL}
    for name, label in (("version", "dumpfilter --version"), ("filter_help", "dumpfilter filter --help")):
        ratio = result[f"{name}_ratio"]
        print(f"{label}: {result[f'{name}_s']} s, {ratio:.2f}x a bare `python -c pass` ({bare:.4f} s); goal "
              f"<= {GOAL}x: {'met' if ratio <= GOAL else 'NOT met'}")
    write_result("startup", result)
    return result


if __name__ == "__main__":
    main()
