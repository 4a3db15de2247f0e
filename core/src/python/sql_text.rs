//! `_core.sql_tokens` and `_core.split_script`: the facts' one lexer and the script splitter
//! built on it, for the Python readers of SQL text (the rule parser, the policy bound, lint, the
//! schema model's and the lab's scripts). Offsets are Python's: characters of the str.

use dumpfilter_stub_attrs::stub;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};

use super::list;
use super::results::records;
use crate::facts::lex::{lex, Cur, Kind, Unlexed};

records! {
    /// One token: its kind ("word", "quoted_ident", "string" or "punct"), its value (a name
    /// unquoted, a string unescaped as MySQL reads it), its first character's offset (a quoted
    /// token's opening quote) and the offset after its last.
    SqlToken = "SqlToken" {
        kind: &'static str,
        value: Py<PyString>,
        start: usize,
        end: usize,
    }

    /// `sql_tokens`: the tokens of a text, or (tokens empty) the one line saying where a quote or
    /// comment is left open and its offset.
    SqlTokens = "SqlTokens" {
        /// SqlToken per token, in order.
        tokens: Py<PyList> as Vec<SqlToken>,
        error: Option<String>,
        error_offset: usize,
    }

    /// A statement of a script as the client sends it, and the line it begins on (1-based).
    ScriptStatement = "ScriptStatement" {
        sql: String,
        line: usize,
    }

    /// `split_script`: the statements of a script; where a quote or comment is left open (`error`),
    /// the last is the rest of the text.
    Script = "Script" {
        /// ScriptStatement per statement, in order.
        statements: Py<PyList> as Vec<ScriptStatement>,
        error: Option<String>,
    }
}

/// A string token's body as MySQL reads it: `\x` pairs (`\%` and `\_` keep their backslash, for
/// LIKE), a doubled quote of its own kind one quote.
fn unescape(body: &[u8], quote: u8) -> Vec<u8> {
    let (mut out, mut bytes) = (Vec::with_capacity(body.len()), body.iter().copied());
    while let Some(c) = bytes.next() {
        let next = (c == b'\\' || c == quote).then(|| bytes.next()).flatten();
        match (c, next) {
            (b'\\', Some(n @ (b'%' | b'_'))) => out.extend([c, n]),
            (b'\\', Some(n)) => {
                let pair = b"0bnrtZ".iter().position(|p| *p == n);
                out.push(pair.map_or(n, |k| b"\0\x08\n\r\t\x1a"[k]));
            }
            _ => out.push(c),
        }
    }
    out
}

fn message(at: Unlexed, offset: usize) -> String {
    match at.opener {
        b'*' => format!("unterminated /* comment at offset {offset}"),
        b'`' => format!("unbalanced ` in backquoted identifier starting at offset {offset}"),
        q => format!(
            "unbalanced {} in string starting at offset {offset}",
            q as char
        ),
    }
}

/// The tokens of `text` (comments skipped, a versioned comment's code read as code). With
/// `ansi_quotes`, a double-quoted string next to a dot or before a parenthesis is a name
/// (`"secret"."f"(1)`: ANSI_QUOTES, which the text does not say).
#[stub]
#[pyfunction]
#[pyo3(signature = (text, ansi_quotes=false))]
pub(super) fn sql_tokens(text: &Bound<'_, PyString>, ansi_quotes: bool) -> PyResult<SqlTokens> {
    let py = text.py();
    let encoded = text.call_method1("encode", ("utf-8", "surrogateescape"))?;
    let sql = encoded.cast::<PyBytes>()?.as_bytes();
    // Character offsets of increasing byte offsets (a byte that does not decode is one).
    let (ascii, mut byte, mut chars) = (sql.is_ascii(), 0, 0);
    let mut char_at = |at: usize| {
        let run = sql[byte..at].utf8_chunks();
        chars += if ascii {
            at - byte
        } else {
            run.map(|c| c.valid().chars().count() + c.invalid().len())
                .sum()
        };
        byte = at;
        chars
    };
    let lexed = match lex(sql) {
        Ok(lexed) => lexed,
        Err(at) => {
            let (tokens, offset) = (PyList::empty(py).unbind(), char_at(at.at));
            let error = Some(message(at, offset));
            return Ok(SqlTokens {
                tokens,
                error,
                error_offset: offset,
            });
        }
    };
    let cur = Cur::new(sql, &lexed.toks);
    let punct = |j: usize, c| cur.is_punct_at(j, c);
    let tokens = lexed.toks.iter().enumerate().map(|(i, t)| {
        let raw = &sql[t.start..t.end];
        let inner = || &raw[1..raw.len() - 1];
        let name = ansi_quotes
            && raw[0] == b'"'
            && (punct(i + 1, b'.') || punct(i + 1, b'(') || (i > 0 && punct(i - 1, b'.')));
        let (kind, value) = match t.kind {
            Kind::Word => ("word", raw.to_vec()),
            Kind::Punct => ("punct", raw.to_vec()),
            Kind::Quoted => ("quoted_ident", crate::stmt::undouble(inner())),
            Kind::Str => (
                if name { "quoted_ident" } else { "string" },
                unescape(inner(), raw[0]),
            ),
        };
        let value = super::text(py, &value)?.unbind();
        Ok(SqlToken {
            kind,
            value,
            start: char_at(t.start),
            end: char_at(t.end),
        })
    });
    Ok(SqlTokens {
        tokens: list(py, tokens)?,
        error: None,
        error_offset: 0,
    })
}

/// The statements of a script (statements ending at `;` or the delimiter a `DELIMITER` line
/// sets), as the mariadb client cuts and sends them; see facts::script.
#[stub]
#[pyfunction]
pub(super) fn split_script(py: Python<'_>, text: &str) -> PyResult<Script> {
    let script = crate::facts::script::split(text.as_bytes());
    let statements = script.statements.into_iter().map(|s| {
        Ok(ScriptStatement {
            sql: String::from_utf8_lossy(&s.sql).into_owned(),
            line: s.line,
        })
    });
    let error = script.open.map(|(at, line)| match at.opener {
        b'*' => "unterminated /* comment".to_owned(),
        q => format!(
            "unterminated {} quote (statement starting on line {line})",
            q as char
        ),
    });
    Ok(Script {
        statements: list(py, statements)?,
        error,
    })
}

/// Adds the classes and functions to the module.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    add_records(m)?;
    functions! { m: sql_tokens, split_script }
    Ok(())
}
