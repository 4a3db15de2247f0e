//! A SQL script (a schema dump, a workload) cut into statements as the mariadb client cuts it
//! (client/mysql.cc `add_line`): a `DELIMITER` line where no statement has begun changes the
//! delimiter; a delimiter inside a quote or a comment cuts nothing; comments are left out as the
//! client leaves them out, but a versioned `/*!...*/` or `/*M!...*/` is code: kept, and cut at a
//! delimiter inside it, as the client does.

use super::lex::{space, Unlexed};
use crate::stmt_cues::quoted_end;

/// A statement as the client sends it (trimmed, comments out) and the line its first character
/// is on (1-based).
pub struct Statement {
    pub sql: Vec<u8>,
    pub line: usize,
}

/// The statements of a script and, where a quote or comment is left open, where (the last
/// statement is then the text from that statement's start to the end).
pub struct Script {
    pub statements: Vec<Statement>,
    pub open: Option<(Unlexed, usize)>,
}

/// The statements of `sql`, in order.
pub fn split(sql: &[u8]) -> Script {
    let mut script = Script {
        statements: Vec::new(),
        open: None,
    };
    let (mut delimiter, mut buf) = (b";".to_vec(), Vec::new());
    // `first`: the line the statement began on (0: none has begun; the buffer holds blanks only).
    let (mut i, mut line, mut first, mut line_start) = (0, 1, 0, true);
    while i < sql.len() {
        if line_start && first == 0 {
            if let Some((new, next)) = delimiter_line(&sql[i..]) {
                (delimiter, i, line) = (new.to_vec(), i + next, line + 1);
                continue;
            }
        }
        let (b, next) = (sql[i], sql.get(i + 1).copied());
        line_start = b == b'\n';
        if sql[i..].starts_with(&delimiter) {
            flush(&mut script.statements, &mut buf, first);
            (first, i) = (0, i + delimiter.len());
            continue;
        }
        let end = if b == b'#' || (b == b'-' && next == Some(b'-') && line_comment(sql.get(i + 2)))
        {
            // A line comment goes, the line's end stays.
            let end = sql[i..].iter().position(|c| *c == b'\n');
            buf.push(b'\n');
            line_start = true;
            Ok(end.map_or(sql.len(), |e| i + e + 1))
        } else if b == b'/'
            && next == Some(b'*')
            && !matches!(sql[i + 2..], [b'!', ..] | [b'M', b'!', ..])
        {
            // A comment goes (one blank in its place); one left open leaves the rest as it is.
            let end = sql[i + 2..].windows(2).position(|w| w == b"*/");
            let end = end.map(|e| i + 2 + e + 2).ok_or(Unlexed {
                at: i,
                opener: b'*',
            });
            if end.is_ok() {
                buf.push(b' ');
            }
            end
        } else {
            if first == 0 && !space(b) {
                first = line;
            }
            let end = if matches!(b, b'\'' | b'"' | b'`') {
                quoted_end(sql, i, b != b'`').ok_or(Unlexed { at: i, opener: b })
            } else {
                Ok(i + 1)
            };
            if let Ok(end) = end {
                buf.extend_from_slice(&sql[i..end]);
            }
            end
        };
        match end {
            Ok(end) => {
                line += sql[i..end].iter().filter(|c| **c == b'\n').count();
                i = end;
            }
            Err(at) => {
                let first = if first == 0 { line } else { first };
                buf.extend_from_slice(&sql[i..]);
                flush(&mut script.statements, &mut buf, first);
                script.open = Some((at, first));
                return script;
            }
        }
    }
    flush(&mut script.statements, &mut buf, first);
    script
}

/// Whether the byte after `--` makes it a comment (a blank or the end, as the client reads it).
fn line_comment(after: Option<&u8>) -> bool {
    after.is_none_or(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
}

/// `DELIMITER xx` alone on its line (any case): the new delimiter and the offset past the line.
fn delimiter_line(rest: &[u8]) -> Option<(&[u8], usize)> {
    let end = rest
        .iter()
        .position(|c| *c == b'\n')
        .map_or(rest.len(), |e| e + 1);
    let mut words = rest[..end].split(|c| space(*c)).filter(|w| !w.is_empty());
    let (verb, delimiter) = (words.next()?, words.next()?);
    (verb.eq_ignore_ascii_case(b"DELIMITER") && words.next().is_none()).then_some((delimiter, end))
}

/// The statement in `buf`, trimmed, if it holds one; `buf` emptied.
fn flush(out: &mut Vec<Statement>, buf: &mut Vec<u8>, line: usize) {
    let start = buf.iter().position(|c| !space(*c));
    if let (Some(start), Some(end)) = (start, buf.iter().rposition(|c| !space(*c))) {
        out.push(Statement {
            sql: buf[start..=end].to_vec(),
            line,
        });
    }
    buf.clear();
}
