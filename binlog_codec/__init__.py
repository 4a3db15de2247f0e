"""Pure binlog v4 codec for MySQL 5.0-9.x and MariaDB 10.x-11.x: events, transactions, readers
over bytes and file-like objects, and a writer. No sockets, no threads, no paths."""

from binlog_codec.constants import EventType, type_name
from binlog_codec.errors import BinlogError, ChecksumError, DumpFilterError, TruncatedBinlogError
from binlog_codec.event import Event
from binlog_codec.format_description import FormatDescription
from binlog_codec.reader import BinlogReader, EventSplitter, read_events, read_format_description
from binlog_codec.transactions import Transaction, TransactionGrouper, group_transactions
from binlog_codec.writer import BinlogWriter, GtidTracker, fix_transaction_length

__all__ = [
    "BinlogError", "BinlogReader", "BinlogWriter", "ChecksumError", "DumpFilterError", "Event",
    "EventSplitter", "EventType", "FormatDescription", "GtidTracker", "Transaction",
    "TransactionGrouper", "TruncatedBinlogError", "fix_transaction_length", "group_transactions",
    "read_events", "read_format_description", "type_name",
]
