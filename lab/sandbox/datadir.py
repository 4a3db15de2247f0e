"""A fresh datadir for each sandbox server, copied from a template: mariadb-install-db bootstraps a
server to write the system tables (about 5 s, most of a server's start), a copy of its result is
40 MB of files (0.3 s). The template is made once per MariaDB build and option set, in the user's
cache directory, and shared by every process (a test run starts about a hundred servers)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

STALE_SECONDS = 3600  # a half-made template left by a killed process is removed after this


def cache_root() -> Path:
    """$DUMPFILTER_CACHE, else $XDG_CACHE_HOME/dumpfilter, else ~/.cache/dumpfilter."""
    if os.environ.get("DUMPFILTER_CACHE"):
        return Path(os.environ["DUMPFILTER_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dumpfilter"


def template_key(binaries: list[str], settings: list[str]) -> str:
    """Names a template by what makes it: the binaries (path, size, mtime: an upgrade makes a new
    one) and the install's options."""
    parts = list(settings)
    for binary in binaries:
        st = os.stat(binary)
        parts.append(f"{os.path.realpath(binary)}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def copy_fresh_datadir(datadir: Path, key: str, install: Callable[[Path], None]) -> None:
    """Fill `datadir` (absent) with a copy of the template `key`, made first by `install(root)`
    (which must write root/"data", and may use root/"tmp") if no process made it yet. Where the
    cache cannot be written, `install` writes the datadir's own root instead."""
    template = _template(key, install)
    if template is None:
        root = datadir.parent
        install(root)
        if root / "data" != datadir:
            (root / "data").rename(datadir)
        return
    shutil.copytree(template, datadir, symlinks=True)


def _template(key: str, install: Callable[[Path], None]) -> Path | None:
    base = cache_root() / "mariadb-datadir"
    done = base / key / "data"
    if (done / "mysql").is_dir():
        return done
    try:
        base.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f"{key}.tmp-", dir=base))
    except OSError:
        return None
    _remove_stale(base)
    try:
        (work / "tmp").mkdir()
        install(work)
        shutil.rmtree(work / "tmp", ignore_errors=True)
        try:
            os.rename(work, base / key)  # atomic: another process's copy never sees half a template
        except OSError:
            if not (done / "mysql").is_dir():  # not another process's template: a real failure
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)  # ours, when another process was first
    return done


def _remove_stale(base: Path) -> None:
    now = time.time()
    for path in base.glob("*.tmp-*"):
        with contextlib.suppress(OSError):
            if now - path.stat().st_mtime > STALE_SECONDS:
                shutil.rmtree(path, ignore_errors=True)
