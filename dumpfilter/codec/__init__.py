"""Pure binlog v4 codec for MySQL 5.0-9.x and MariaDB 10.x-11.x: events, transactions, readers
over bytes and file-like objects, and a writer. No sockets, no threads, no paths."""

from dumpfilter.codec.constants import EventType, type_name
from dumpfilter.codec.event import Event
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.reader import BinlogReader, EventSplitter, bad_magic, read_events, read_format_description
from dumpfilter.codec.transactions import Transaction, TransactionGrouper, group_transactions
from dumpfilter.codec.writer import BinlogWriter, GtidTracker, fix_transaction_length

__all__ = [
    "BinlogReader", "BinlogWriter", "Event",
    "EventSplitter", "EventType", "FormatDescription", "GtidTracker", "Transaction",
    "TransactionGrouper", "bad_magic", "fix_transaction_length", "group_transactions",
    "read_events", "read_format_description", "type_name",
]
