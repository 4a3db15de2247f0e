//! The statement facts' lexer: `rules.sqltokens.tokenize`'s tokens for the text the core reads
//! (ASCII, no comment of any kind), and a cursor over them with the Python parser's helpers.
//! Anything else is None: the Python parser reads that statement.

use std::borrow::Cow;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Word,
    Quoted,
    Str,
    Punct,
}

/// One token: its kind and its text's span (a quoted token's span holds its quotes).
#[derive(Debug, Clone, Copy)]
pub struct Tok {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
}

pub(crate) use crate::stmt::space;

#[inline]
fn word_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$'
}

/// The tokens of `sql`, or None: a byte outside ASCII, a comment or versioned comment (`/*`,
/// `*/`, `#`, `--`: mysqld's rules for them are the Python lexer's business), an unclosed quote.
pub fn tokens(sql: &[u8]) -> Option<Vec<Tok>> {
    if !sql.is_ascii() {
        return None;
    }
    let mut out = Vec::with_capacity(sql.len() / 4 + 4);
    let mut i = 0;
    while i < sql.len() {
        let b = sql[i];
        if space(b) {
            i += 1;
            continue;
        }
        let start = i;
        let kind = if word_char(b) {
            while i < sql.len() && word_char(sql[i]) {
                i += 1;
            }
            Kind::Word
        } else if b == b'`' || b == b'\'' || b == b'"' {
            i += 1;
            loop {
                match sql.get(i) {
                    None => return None,
                    // A doubled quote stays inside; a backslash escapes in strings only.
                    Some(&c) if c == b && sql.get(i + 1) == Some(&b) => i += 2,
                    Some(&c) if c == b => {
                        i += 1;
                        break;
                    }
                    Some(b'\\') if b != b'`' => {
                        if i + 1 >= sql.len() {
                            return None;
                        }
                        i += 2;
                    }
                    Some(_) => i += 1,
                }
            }
            if b == b'`' {
                if i - start == 2 {
                    return None; // `` is no name
                }
                Kind::Quoted
            } else {
                Kind::Str
            }
        } else {
            let next = sql.get(i + 1).copied();
            if b == b'#'
                || (b == b'/' && next == Some(b'*'))
                || (b == b'*' && next == Some(b'/'))
                || (b == b'-' && next == Some(b'-'))
            {
                return None;
            }
            i += if b == b'-' && next == Some(b'>') {
                2
            } else {
                1
            };
            Kind::Punct
        };
        out.push(Tok {
            kind,
            start,
            end: i,
        });
    }
    Some(out)
}

/// A cursor over one statement's tokens, with the Python parser's helpers (`_Statement`).
pub struct Cur<'a> {
    pub sql: &'a [u8],
    pub toks: &'a [Tok],
    pub at: usize,
}

/// A name as read: its database (None: unqualified) and its name, unquoted.
pub type QName = (Option<Vec<u8>>, Vec<u8>);

impl<'a> Cur<'a> {
    pub fn new(sql: &'a [u8], toks: &'a [Tok]) -> Self {
        Cur { sql, toks, at: 0 }
    }

    pub fn text(&self, t: &Tok) -> &'a [u8] {
        &self.sql[t.start..t.end]
    }

    /// An identifier token's name: a word as is, a backquoted one unquoted.
    pub fn name_of(&self, t: &Tok) -> Cow<'a, [u8]> {
        let raw = self.text(t);
        if t.kind != Kind::Quoted {
            return Cow::Borrowed(raw);
        }
        let inner = &raw[1..raw.len() - 1];
        if !inner.windows(2).any(|w| w == b"``") {
            return Cow::Borrowed(inner);
        }
        Cow::Owned(crate::stmt::undouble(inner))
    }

    /// Whether token `i` is the keyword `kw` (a word, any case).
    pub fn is_word_at(&self, i: usize, kw: &[u8]) -> bool {
        self.toks
            .get(i)
            .is_some_and(|t| t.kind == Kind::Word && self.text(t).eq_ignore_ascii_case(kw))
    }

    /// `word(offset) == kw`.
    pub fn is(&self, kw: &[u8]) -> bool {
        self.is_word_at(self.at, kw)
    }

    /// The word at the cursor, or None (not a word, or the end).
    pub fn word(&self) -> Option<&'a [u8]> {
        self.toks
            .get(self.at)
            .filter(|t| t.kind == Kind::Word)
            .map(|t| self.text(t))
    }

    pub fn accept(&mut self, kw: &[u8]) -> bool {
        if self.is(kw) {
            self.at += 1;
            return true;
        }
        false
    }

    pub fn accept_any(&mut self, kws: &[&[u8]]) -> bool {
        kws.iter().any(|kw| self.accept(kw))
    }

    pub fn is_punct_at(&self, i: usize, c: u8) -> bool {
        self.toks.get(i).is_some_and(|t| {
            t.kind == Kind::Punct && self.sql[t.start] == c && t.end == t.start + 1
        })
    }

    pub fn accept_punct(&mut self, c: u8) -> bool {
        if self.is_punct_at(self.at, c) {
            self.at += 1;
            return true;
        }
        false
    }

    pub fn is_identifier_at(&self, i: usize) -> bool {
        self.toks
            .get(i)
            .is_some_and(|t| matches!(t.kind, Kind::Word | Kind::Quoted))
    }

    /// `identifier`: a name here, consumed. A reserved word unquoted is None: the server refuses
    /// it as a name (no binlog holds one), and sqlglot reads such text otherwise than the parser.
    pub fn identifier(&mut self) -> Option<Vec<u8>> {
        if !self.is_identifier_at(self.at) || self.is_reserved_at(self.at) {
            return None;
        }
        self.at += 1;
        Some(self.name_of(&self.toks[self.at - 1]).into_owned())
    }

    /// Whether token `i` is an unquoted reserved word (stmt::reserved's list).
    pub fn is_reserved_at(&self, i: usize) -> bool {
        self.toks
            .get(i)
            .is_some_and(|t| t.kind == Kind::Word && crate::stmt::reserved(self.text(t)))
    }

    /// `qualified_name`: name, or db `.` name.
    pub fn qname(&mut self) -> Option<QName> {
        let first = self.identifier()?;
        if self.accept_punct(b'.') {
            return Some((Some(first), self.identifier()?));
        }
        Some((None, first))
    }

    /// `skip_if_exists`: IF EXISTS (true) or IF NOT EXISTS (false), skipped.
    pub fn if_exists(&mut self) -> bool {
        if self.is(b"IF") && self.is_word_at(self.at + 1, b"EXISTS") {
            self.at += 2;
            return true;
        }
        if self.is(b"IF")
            && self.is_word_at(self.at + 1, b"NOT")
            && self.is_word_at(self.at + 2, b"EXISTS")
        {
            self.at += 3;
        }
        false
    }

    /// `skip_modifiers`: the words of `words`, each with `= value` after it when one follows.
    pub fn skip_modifiers(&mut self, words: &[&[u8]]) {
        while self.accept_any(words) {
            if self.accept_punct(b'=') {
                self.skip_value();
            }
        }
    }

    /// `skip_value`: a `user@host` or `CURRENT_USER[()]` value, as the Python parser skips it
    /// (the token after a closing parenthesis too, when it is no punctuation: so does Python).
    fn skip_value(&mut self) {
        self.at += 1;
        while self.accept_punct(b'@') || self.accept_punct(b'(') || self.accept_punct(b')') {
            if self.at < self.toks.len() && self.toks[self.at].kind != Kind::Punct {
                self.at += 1;
            }
        }
    }

    /// `_skip_to(word)`: past the next `word`; false where nothing follows it (Python gives up).
    pub fn skip_to(&mut self, kw: &[u8]) -> bool {
        while self.at < self.toks.len() && !self.accept(kw) {
            self.at += 1;
        }
        self.at < self.toks.len()
    }

    /// `_find_top_level(word)`: the first `word` at parenthesis depth 0 from the cursor.
    pub fn find_top_level(&self, kw: &[u8]) -> Option<usize> {
        let mut depth = 0i32;
        for i in self.at..self.toks.len() {
            if self.is_punct_at(i, b'(') {
                depth += 1;
            } else if self.is_punct_at(i, b')') {
                depth -= 1;
            } else if depth == 0 && self.is_word_at(i, kw) {
                return Some(i);
            }
        }
        None
    }

    /// Whether any word token of the statement is `kw`.
    pub fn has_word(&self, kw: &[u8]) -> bool {
        (0..self.toks.len()).any(|i| self.is_word_at(i, kw))
    }
}
