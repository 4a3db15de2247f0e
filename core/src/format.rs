//! The Format_description event: the checksum algorithm and the post-header lengths that tell
//! every later event's layout. Mirrors `dumpfilter/codec/format_description.py`.

use crate::types::*;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format {
    pub mariadb: bool,
    /// None for servers that predate checksums (no algorithm byte at all).
    pub checksum_alg: Option<u8>,
    /// Bytes of CRC at the end of every non-FDE event.
    pub checksum_len: usize,
    pub post_header: Vec<u8>,
    /// Whether fast units can be read in this format (see `fast_ok`), computed once.
    pub fast: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError(pub String);

// binlog_version u16, server_version char[50], create_timestamp u32, common_header_len u8
const FDE_FIXED: usize = 2 + 50 + 4 + 1;

fn version_tuple(v: &[u8]) -> (u32, u32, u32) {
    let mut parts = [0u32; 3];
    let mut i = 0;
    for (n, part) in parts.iter_mut().enumerate() {
        let start = i;
        while i < v.len() && v[i].is_ascii_digit() {
            *part = part.saturating_mul(10).saturating_add((v[i] - b'0') as u32);
            i += 1;
        }
        if i == start || (n < 2 && v.get(i) != Some(&b'.')) {
            return (0, 0, 0);
        }
        i += 1;
    }
    (parts[0], parts[1], parts[2])
}

impl Format {
    pub fn parse(raw: &[u8]) -> Result<Format, FormatError> {
        if raw.get(4) != Some(&FORMAT_DESCRIPTION) {
            return Err(FormatError("expected a Format_description event".into()));
        }
        if raw.len() < HEADER_LEN + FDE_FIXED {
            return Err(FormatError(format!(
                "Format_description event too short ({} bytes)",
                raw.len()
            )));
        }
        let binlog_version = u16::from_le_bytes([raw[19], raw[20]]);
        if binlog_version != 4 {
            return Err(FormatError(format!(
                "binlog format version {binlog_version} is not supported (only v4)"
            )));
        }
        let header_len = raw[HEADER_LEN + FDE_FIXED - 1];
        if header_len as usize != HEADER_LEN {
            return Err(FormatError(format!(
                "common header length {header_len} is not 19"
            )));
        }
        let version = &raw[21..71];
        let version = &version[..version
            .iter()
            .position(|b| *b == 0)
            .unwrap_or(version.len())];
        let mariadb = version
            .to_ascii_lowercase()
            .windows(7)
            .any(|w| w == b"mariadb");
        let v = version_tuple(version);
        // Servers from MySQL 5.6.1 and MariaDB 5.3.0 on end their FDE with the checksum algorithm
        // byte and a CRC, even when binlog_checksum=NONE (Log_event_footer::get_checksum_alg).
        let aware = if mariadb {
            v >= (5, 3, 0)
        } else {
            v >= (5, 6, 1)
        };
        let start = HEADER_LEN + FDE_FIXED;
        let (checksum_alg, post_header) = if aware {
            let n = raw.len();
            let alg = raw[n - 5];
            let ph = if n >= start + 5 {
                raw[start..n - 5].to_vec()
            } else {
                Vec::new()
            };
            (Some(alg), ph)
        } else {
            (None, raw[start..].to_vec())
        };
        let checksum_len = if checksum_alg == Some(1) { 4 } else { 0 };
        let mut fmt = Format {
            mariadb,
            checksum_alg,
            checksum_len,
            post_header,
            fast: false,
        };
        fmt.fast = fmt.fast_ok();
        Ok(fmt)
    }

    #[inline]
    pub fn post_header_len(&self, t: u8) -> u8 {
        let at = usize::from(t).wrapping_sub(1); // (type 0: usize::MAX, past the end)
        self.post_header.get(at).copied().unwrap_or(0)
    }

    /// Table ids are 6 bytes, except in 5.1 pre-GA servers whose post-header is 6 bytes long.
    #[inline]
    pub fn table_id_len(&self, t: u8) -> usize {
        if self.post_header_len(t) == 6 {
            4
        } else {
            6
        }
    }

    /// Fast units need 8-byte Table_map post-headers and 6-byte table ids (every server since 5.1 GA).
    pub fn fast_ok(&self) -> bool {
        self.post_header.len() >= TABLE_MAP as usize
            && self.post_header_len(TABLE_MAP) == 8
            && (0..=255u8)
                .filter(|t| is_rows(*t))
                .all(|t| self.table_id_len(t) == 6)
    }
}

const NAMES: [(u8, &str); 55] = [
    (0, "UNKNOWN"),
    (1, "START_V3"),
    (2, "QUERY"),
    (3, "STOP"),
    (4, "ROTATE"),
    (5, "INTVAR"),
    (6, "LOAD"),
    (7, "SLAVE"),
    (8, "CREATE_FILE"),
    (9, "APPEND_BLOCK"),
    (10, "EXEC_LOAD"),
    (11, "DELETE_FILE"),
    (12, "NEW_LOAD"),
    (13, "RAND"),
    (14, "USER_VAR"),
    (15, "FORMAT_DESCRIPTION"),
    (16, "XID"),
    (17, "BEGIN_LOAD_QUERY"),
    (18, "EXECUTE_LOAD_QUERY"),
    (19, "TABLE_MAP"),
    (20, "PRE_GA_WRITE_ROWS"),
    (21, "PRE_GA_UPDATE_ROWS"),
    (22, "PRE_GA_DELETE_ROWS"),
    (23, "WRITE_ROWS_V1"),
    (24, "UPDATE_ROWS_V1"),
    (25, "DELETE_ROWS_V1"),
    (26, "INCIDENT"),
    (27, "HEARTBEAT"),
    (28, "IGNORABLE"),
    (29, "ROWS_QUERY"),
    (30, "WRITE_ROWS"),
    (31, "UPDATE_ROWS"),
    (32, "DELETE_ROWS"),
    (33, "GTID"),
    (34, "ANONYMOUS_GTID"),
    (35, "PREVIOUS_GTIDS"),
    (36, "TRANSACTION_CONTEXT"),
    (37, "VIEW_CHANGE"),
    (38, "XA_PREPARE"),
    (39, "PARTIAL_UPDATE_ROWS"),
    (40, "TRANSACTION_PAYLOAD"),
    (41, "HEARTBEAT_V2"),
    (42, "GTID_TAGGED"),
    (160, "ANNOTATE_ROWS"),
    (161, "BINLOG_CHECKPOINT"),
    (162, "MARIADB_GTID"),
    (163, "MARIADB_GTID_LIST"),
    (164, "START_ENCRYPTION"),
    (165, "QUERY_COMPRESSED"),
    (166, "WRITE_ROWS_COMPRESSED_V1"),
    (167, "UPDATE_ROWS_COMPRESSED_V1"),
    (168, "DELETE_ROWS_COMPRESSED_V1"),
    (169, "WRITE_ROWS_COMPRESSED"),
    (170, "UPDATE_ROWS_COMPRESSED"),
    (171, "DELETE_ROWS_COMPRESSED"),
];

/// The event type's name as `codec.constants.type_name` gives it.
pub fn type_name(t: u8) -> String {
    NAMES
        .iter()
        .find(|(c, _)| *c == t)
        .map(|(_, n)| n.to_string())
        .unwrap_or_else(|| format!("UNKNOWN_{t}"))
}
