"""Hostile binlog inputs, built from the real fixtures: each is one line on stderr naming the file
(and the byte offset where there is one), exit 2, never a traceback, whichever command reads it.

- A corrupt or truncated `.gz` binlog (or a plain one named `.gz`) is a BinlogError from the one
  place gzipped binlogs are read (`binlogs.files.GzipBinlog`), whoever reads: `filter` (which
  asks the flavor first), `lint`, `split`, `experiment`, `binlog inspect`, a simulate topology.
- A malformed event names its file, and says what is wrong in the codec's words, not Python's
  (`unpack_from requires ...`, `IndexError`, `byte must be in range(0, 256)`).
- An index naming a file that is not in its directory (`/etc/passwd`, `../dir`, a deleted
  `x-bin.000002`) is refused, naming the index and its line, by every command, as a server
  refuses to start on it; an index that names nothing too.
- `--no-verify-checksums` holds for every event, the header events `split` copies too.
- A file given twice is refused by every command that reads binlog files.
- A file that is only the magic has no Format_description event, for `binlog inspect` too.
- An output that cannot be written is the output's error, never the input's.
"""

from __future__ import annotations

import errno
import gzip
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from dumpfilter.binlogs import distinct_paths, input_paths, open_binlog
from dumpfilter.binlogs.files import binlog_format
from dumpfilter.binlogs.filtering import filter_files
from dumpfilter.binlogs.sinks import FileSink
from dumpfilter.codec import BinlogReader, read_format_description
from dumpfilter.errors import BinlogError, MalformedEventError, TruncatedBinlogError
from dumpfilter.rules.transaction_filter import TransactionFilter
from tests.support.filtering import engine

MARIADB = ("blackbeam-rust_mysql_common", "mariadb-bin.000001")
TAGGED = ("blackbeam-rust_mysql_common", "binlog_transaction_with_GTID_TAG.000001")
COMPRESSED = ("osheroff-mysql-binlog-connector-java", "mysql-bin.compressed")

# What Python says, never the user: the words of struct, of an IndexError, of bytearray.append.
PYTHON_WORDS = ("Traceback", "unpack_from", "IndexError", "ValueError", "struct.error", "index out of range",
                "must be in range", "EOFError", "BadGzipFile", "zlib.error", "<binlog>", "Error -3")


def dumpfilter(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dumpfilter", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)


def one_line(result: subprocess.CompletedProcess[str], *says: str) -> str:
    """The run's one stderr line, checked: exit 2, no traceback, no Python words, every `says` in it."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    line = lines[0]
    for word in PYTHON_WORDS:
        assert word not in line, line
    for part in says:
        assert part in line, line
    return line


@pytest.fixture
def real(shared_fixtures: Path):
    def read(which: tuple[str, str]) -> bytes:
        return (shared_fixtures / which[0] / which[1]).read_bytes()
    return read


def commands(target: Path, out: Path, *extra: str) -> dict[str, tuple[str | Path, ...]]:
    """Every command that reads binlog files, over `target` (`extra`: more options for each)."""
    topology = out.parent / f"{out.name}-topology.toml"
    topology.write_text('[[slaves]]\nname = "a"\nserver_id = 2\nrules = ["replicate-do-db=db1"]\n')
    return {
        "filter": ("filter", *extra, "-o", out / "filtered.bin", target),
        "lint": ("lint", *extra, target),
        "split": ("split", "--no-spark", *extra, "--out", out / "split", target),
        "inspect": ("binlog", "inspect", *extra, target),
        "experiment": ("experiment", "--no-spark", "--no-charts", "--out", out / "experiment",
                       "--topology", topology, "--binlogs", target),
    }


# -- 1. gzipped binlogs -----------------------------------------------------------------------------

def gz_inputs(data: bytes) -> dict[str, bytes]:
    whole = gzip.compress(data, mtime=0)
    flipped = bytearray(whole)
    flipped[100] ^= 0xFF
    return {"truncated": whole[:200], "plain": data, "flipped": bytes(flipped)}


GZ_SAYS = {
    "truncated": ("the gzip data ends early", " at byte "),
    "plain": ("at byte 0: not a gzip file", "plain binlog"),
    "flipped": ("corrupt gzip data", " at byte "),
}


@pytest.mark.parametrize("shape", GZ_SAYS)
def test_a_bad_gz_binlog_is_one_line_for_every_command(tmp_path, real, shape):
    hostile = tmp_path / "t.gz"
    hostile.write_bytes(gz_inputs(real(MARIADB))[shape])
    out = tmp_path / "out"
    out.mkdir()
    for args in commands(hostile, out).values():
        one_line(dumpfilter(*args, cwd=tmp_path), str(hostile), *GZ_SAYS[shape])
    # `filter` and `lint` given --flavor read the file without asking its FDE first: the same line
    for args in (("filter", "--flavor", "mysql", "-o", out / "f.bin", hostile), ("lint", "--flavor", "mysql", hostile)):
        one_line(dumpfilter(*args, cwd=tmp_path), str(hostile), *GZ_SAYS[shape])


def test_a_truncated_gz_names_the_offset_it_decompresses_to(tmp_path, real):
    data = real(MARIADB)
    hostile = tmp_path / "t.gz"
    hostile.write_bytes(gzip.compress(data, mtime=0)[:200])
    with open_binlog(hostile) as stream, pytest.raises(TruncatedBinlogError) as info:
        read_format_description(stream, str(hostile))
    assert info.value.path == str(hostile)
    assert info.value.offset is not None and 0 < info.value.offset < len(data)
    with open_binlog(hostile) as stream, pytest.raises(TruncatedBinlogError):
        list(BinlogReader(stream, str(hostile)))
    # a whole .gz reads as the binlog it holds
    whole = tmp_path / "w.gz"
    whole.write_bytes(gzip.compress(data, mtime=0))
    with open_binlog(whole) as stream:
        assert stream.read() == data


def test_a_bad_gz_in_a_simulate_topology_is_one_line(tmp_path, real):
    hostile = tmp_path / "t.gz"
    hostile.write_bytes(gz_inputs(real(MARIADB))["truncated"])
    topology = tmp_path / "topology.toml"
    topology.write_text('[master]\nfiles = ["t.gz"]\n\n[[slaves]]\nname = "a"\nserver_id = 2\n'
                        'rules = ["replicate-do-db=db1"]\n')
    # (simulate serves a copy of the files it is given: the line names the copy, t.gz)
    one_line(dumpfilter("simulate", "--no-progress", "--topology", topology, "--out", tmp_path / "sim", cwd=tmp_path),
             "/t.gz at byte ", "the gzip data ends early")


# -- 2, 3. malformed events -------------------------------------------------------------------------

def with_size(data: bytes, at: int, size: int) -> bytes:
    out = bytearray(data)
    out[at + 9:at + 13] = struct.pack("<I", size)
    return bytes(out)


# (fixture, offset of the event, its type name, what inspect says of it at size 19: no body at all)
SHRUNK = [
    (MARIADB, 330, "MARIADB_GTID", "body of 0 bytes, needs 13"),
    (MARIADB, 256, "MARIADB_GTID_LIST", "body of 0 bytes, needs 4"),
    (MARIADB, 476, "TABLE_MAP", "the db or table name runs past the end of the event"),
    (TAGGED, 328, "QUERY", "the post-header runs past the end of the event"),
    (TAGGED, 541, "ROTATE", "body of 0 bytes, needs 8"),
    (TAGGED, 127, "PREVIOUS_GTIDS", "body of 0 bytes, needs 8"),
    (TAGGED, 245, "GTID_TAGGED", "body of 0 bytes, needs 3"),
    (COMPRESSED, 157, "ANONYMOUS_GTID", "body of 0 bytes, needs 25"),
]


@pytest.mark.parametrize("source, at, type_name, says", SHRUNK, ids=[s[2] for s in SHRUNK])
def test_a_malformed_event_names_its_file_and_says_what_is_wrong(tmp_path, real, source, at, type_name, says):
    hostile = tmp_path / "shrunk.bin"
    hostile.write_bytes(with_size(real(source), at, 19))
    one_line(dumpfilter("binlog", "inspect", "--no-verify-checksums", hostile, cwd=tmp_path),
             f"{hostile} at byte {at}: malformed {type_name} event: {says}")
    # the other commands meet it in the compiled scan (or a decoder): the file is named
    out = tmp_path / "out"
    out.mkdir()
    for name, args in commands(hostile, out, "--no-verify-checksums").items():
        if name != "experiment":  # (experiment has no --no-verify-checksums)
            one_line(dumpfilter(*args, cwd=tmp_path), f"{hostile} at byte ")


def test_the_compiled_scan_names_the_offset_of_a_short_mariadb_gtid(tmp_path, real):
    hostile = tmp_path / "shrunk.bin"
    hostile.write_bytes(with_size(real(MARIADB), 330, 19))
    one_line(dumpfilter("filter", "--no-verify-checksums", "-o", tmp_path / "f.bin", hostile, cwd=tmp_path),
             f"{hostile} at byte 330: ")


def test_a_tagged_gtid_out_of_range_is_said_in_the_codecs_words(tmp_path, real):
    data = bytearray(real(TAGGED))
    data[280] = 128  # a byte of the source UUID read as a varlen of more than one byte
    hostile = tmp_path / "tagged.bin"
    hostile.write_bytes(bytes(data))
    for args in (("binlog", "inspect", "--no-verify-checksums", hostile),
                 ("split", "--no-spark", "--no-verify-checksums", "--out", tmp_path / "split", hostile)):
        one_line(dumpfilter(*args, cwd=tmp_path), f"{hostile} at byte 245: malformed GTID_TAGGED event: ")


@pytest.mark.parametrize("damage", ["size-487", "flip-416"])
def test_a_transaction_payload_that_does_not_decompress_names_its_file(tmp_path, real, damage):
    data = real(COMPRESSED)
    if damage == "size-487":
        data = with_size(data, 236, 487)
    else:
        flipped = bytearray(data)
        flipped[416] ^= 0xFF
        data = bytes(flipped)
    hostile = tmp_path / "payload.bin"
    hostile.write_bytes(data)
    out = tmp_path / "out"
    out.mkdir()
    for args in (("filter", "--no-verify-checksums", "-o", out / "f.bin", hostile),
                 ("lint", "--no-verify-checksums", hostile),
                 ("split", "--no-spark", "--no-verify-checksums", "--out", out / "split", hostile)):
        one_line(dumpfilter(*args, cwd=tmp_path), f"{hostile} at byte 236: Transaction_payload ")


def test_decoders_say_what_is_short_without_python_words(real):
    from dumpfilter.codec import EventSplitter

    splitter = EventSplitter(verify_checksums=False)
    splitter.feed(with_size(real(MARIADB), 330, 19))
    gtid = next(e for e in splitter.events() if e.pos == 330)  # (the bytes after it are no event)
    with pytest.raises(MalformedEventError) as info:
        _ = gtid.gtid
    assert str(info.value) == "<binlog> at byte 330: malformed MARIADB_GTID event: body of 0 bytes, needs 13"
    assert str(info.value.in_file("f")) == "f at byte 330: malformed MARIADB_GTID event: body of 0 bytes, needs 13"


# -- 4. index files ---------------------------------------------------------------------------------

INDEXES = {
    "outside": (b"/etc/passwd\n", "line 1 of the binlog index names 'passwd' ('/etc/passwd')", 0),
    "parent": (b"./x-bin.000001\n../dir\n", "line 2 of the binlog index names 'dir' ('../dir')", 15),
    "missing": (b"./x-bin.000001\n./x-bin.000002\n", "line 2 of the binlog index names 'x-bin.000002'", 15),
}


@pytest.mark.parametrize("shape", INDEXES)
def test_an_index_naming_a_file_not_in_its_directory_is_refused_by_every_command(tmp_path, real, shape):
    text, says, offset = INDEXES[shape]
    directory = tmp_path / "binlogs"
    directory.mkdir()
    (directory / "x-bin.000001").write_bytes(real(MARIADB))
    (directory / "x-bin.index").write_bytes(text)
    out = tmp_path / "out"
    out.mkdir()
    for name, args in commands(directory, out).items():
        result = dumpfilter(*args, cwd=tmp_path)
        one_line(result, f"{directory / 'x-bin.index'} at byte {offset}: {says}")
        assert result.stdout == "", name  # (inspect printed the first file and exited 0)
    assert not (out / "split").exists() and not (out / "experiment").exists()


def test_an_index_that_names_nothing_is_refused(tmp_path, real):
    directory = tmp_path / "binlogs"
    directory.mkdir()
    (directory / "x-bin.000001").write_bytes(real(MARIADB))
    (directory / "x-bin.index").write_bytes(b"\n")
    for args in (("binlog", "inspect", directory), ("lint", directory)):
        one_line(dumpfilter(*args, cwd=tmp_path), f"{directory / 'x-bin.index'}: the binlog index names no binlog file")


# -- 5. --no-verify-checksums -----------------------------------------------------------------------

@pytest.mark.parametrize("at, type_name", [(255, "Format_description"), (284, "MARIADB_GTID_LIST"),
                                           (371, "MARIADB_GTID")])
def test_no_verify_checksums_holds_for_every_event(tmp_path, real, at, type_name):
    data = bytearray(real(MARIADB))
    data[at] ^= 0x01  # a byte of the event's CRC32
    hostile = tmp_path / "crc.bin"
    hostile.write_bytes(bytes(data))
    def runs(out: Path) -> dict[str, tuple[str | Path, ...]]:
        return {
            "filter": ("filter", "-o", out / "f.bin", hostile),
            "filter-out": ("filter", "--out", out / "series", hostile),
            "lint": ("lint", hostile),
            "split": ("split", "--no-spark", "--out", out / "split", hostile),
        }

    (tmp_path / "a").mkdir()
    for name, args in runs(tmp_path / "a").items():
        result = dumpfilter(args[0], "--no-verify-checksums", *args[1:], cwd=tmp_path)
        assert result.returncode == 0, (name, result.stderr)
    (tmp_path / "b").mkdir()
    for args in runs(tmp_path / "b").values():  # and without it, each says where the CRC is wrong
        one_line(dumpfilter(*args, cwd=tmp_path), f"{hostile} at byte ", f"CRC32 mismatch in {type_name} event")


def test_a_gtid_list_whose_count_is_wrong_is_malformed_not_a_crc_error(tmp_path, real):
    """The probe's input (byte 278 = 127) changes the Gtid_list's count, not only its CRC: filter -o
    copies the event, but split and filter --out decode it for their outputs' GTID state."""
    data = bytearray(real(MARIADB))
    data[278] = 127
    hostile = tmp_path / "gtid_list.bin"
    hostile.write_bytes(bytes(data))
    assert dumpfilter("filter", "--no-verify-checksums", "-o", tmp_path / "f.bin", hostile,
                      cwd=tmp_path).returncode == 0
    for args in (("split", "--no-spark", "--no-verify-checksums", "--out", tmp_path / "split", hostile),
                 ("filter", "--no-verify-checksums", "--out", tmp_path / "series", hostile)):
        line = one_line(dumpfilter(*args, cwd=tmp_path),
                        f"{hostile} at byte 256: malformed MARIADB_GTID_LIST event: 251658240 GTIDs")
        assert "CRC32" not in line


def test_the_format_is_read_without_its_crc_unless_asked(tmp_path, real):
    data = bytearray(real(MARIADB))
    data[255] ^= 0x01  # the FDE's CRC32
    hostile = tmp_path / "fde.bin"
    hostile.write_bytes(bytes(data))
    assert binlog_format(hostile).flavor == "mariadb"
    with pytest.raises(BinlogError, match="CRC32 mismatch in Format_description event"):
        binlog_format(hostile, verify_checksums=True)


# -- 6. a file given twice --------------------------------------------------------------------------

def test_a_file_given_twice_is_refused_by_every_command(tmp_path, real):
    path = tmp_path / "x-bin.000001"
    path.write_bytes(real(MARIADB))
    runs = {
        "filter": ("filter", "--out", tmp_path / "series", path, path),
        "lint": ("lint", path, path),
        "split": ("split", "--no-spark", "--out", tmp_path / "split", path, path),
        "inspect": ("binlog", "inspect", path, path),
    }
    for name, args in runs.items():
        result = dumpfilter(*args, cwd=tmp_path)
        one_line(result, f"{path}: binlog file given twice")
        assert result.stdout == "", name
    assert not list(tmp_path.glob("series/x-bin.*")) and not (tmp_path / "split").exists()


def test_distinct_paths_sees_a_file_under_another_name(tmp_path, real):
    path = tmp_path / "x-bin.000001"
    path.write_bytes(real(MARIADB))
    (tmp_path / "link").symlink_to(path)
    with pytest.raises(BinlogError, match=r"link: binlog file given twice \(also as .*x-bin\.000001\)"):
        distinct_paths([path, tmp_path / "link"])
    with pytest.raises(BinlogError, match="binlog file given twice"):
        input_paths([tmp_path, path])  # the directory's series holds it already
    assert input_paths([tmp_path]) == [path]


# -- 7. the magic alone -----------------------------------------------------------------------------

def test_a_file_that_is_only_the_magic_has_no_format_description_for_every_command(tmp_path, real):
    hostile = tmp_path / "magic.bin"
    hostile.write_bytes(real(MARIADB)[:4])
    out = tmp_path / "out"
    out.mkdir()
    for args in commands(hostile, out).values():
        one_line(dumpfilter(*args, cwd=tmp_path), f"{hostile} at byte 4: no Format_description event")


# -- 8. the output's own errors ---------------------------------------------------------------------

def test_an_output_that_cannot_be_written_is_not_blamed_on_the_input(tmp_path, shared_fixtures):
    """What the sink raises (a socket's path cannot be opened: ENXIO; /dev/full refuses every write:
    ENOSPC) leaves filter_files as the sink's OSError, for whoever named the output to report; it was
    the input's BinlogError ("<input>: is a socket or a device, not a binlog file")."""
    source = shared_fixtures / "rust-us-mysql-cdc-rs" / "binlog.000693"  # 2.2 MB: ENOSPC while filtering
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock"))
        for out, code in ((tmp_path / "sock", errno.ENXIO), (Path("/dev/full"), errno.ENOSPC)):
            with pytest.raises(OSError) as info:
                filter_files([source], TransactionFilter(engine([])), FileSink(out))
            assert info.value.errno == code, info.value
