"""read: the binlog read once for all slaves. The unit model (units), the bytes of a file a
segment scans (windows), the compiled scanner's units kept as columns of the core's UnitList
(columns), the one-pass reader (segment_reader), the binlog directory's listing and end (listing),
the shared segment cache (segments) and the series' one schema timeline fed from it (schema_feed)."""
