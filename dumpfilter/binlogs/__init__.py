"""Binlog files on disk: opening one (plain or gzipped), index files, ordered directories, and a
reader of a directory a live server may still be writing. The thin file-system
edge of `dumpfilter.codec`."""

from dumpfilter.binlogs.files import (
    BinlogFile, binlog_paths, distinct_paths, input_paths, open_binlog, read_index, served_paths, write_index,
)
from dumpfilter.binlogs.series import FILE_FRAMING_TYPES, BinlogSeriesWriter
from dumpfilter.binlogs.tail import TailingReader

__all__ = ["BinlogSeriesWriter", "FILE_FRAMING_TYPES", "BinlogFile", "TailingReader", "binlog_paths", "distinct_paths",
           "input_paths", "open_binlog", "read_index", "served_paths", "write_index"]
