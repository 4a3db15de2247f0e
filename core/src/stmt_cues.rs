//! Which statement texts the core leaves to Python: `needs_python` finds a byte outside ASCII,
//! or a cue that needs the parser (a SELECT or RETURNING word, a comment opener),
//! anywhere in the text, in one pass over it, sixteen or eight bytes at a time (a statement's
//! text is most of a MIXED binlog's bytes); where it finds one, `outside_literals` reads the text
//! again with its string literals skipped (UTF-8 values, a `'#'` or `'--'` in a value are no
//! cue). `stmt::dml_shape` asks them first.

/// How the server read a Query's string literals, from its status variables
/// (`sql::query_literals`): `Unknown` where they do not say (a literal is then read only where
/// every reading ends it at the same quote: `literal_end`); `Escaped` where its sql_mode has
/// backslash escapes on (MySQL's default: `'O\'Brien'` is one literal); `EscapedPlainBytes`
/// where, besides, its client character set is one in which a backslash byte is always a
/// backslash (never the second byte of a character, as it may be in sjis, cp932, gbk, big5 or
/// gb18030).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Literals {
    #[default]
    Unknown,
    Escaped,
    EscapedPlainBytes,
}

/// `\b`'s word characters in ASCII text.
#[inline]
pub(crate) fn word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether the core leaves this statement's text to Python: a byte outside ASCII (Python's
/// Unicode rules bite there: case folding, `\s`, `\b`), or a cue (`\bSELECT\b|/\*|#|--|
/// \bRETURNING\b`, case-insensitive) anywhere in the text. One pass, sixteen bytes at a time
/// (SSE2, x86_64's baseline), else eight (a statement's text is most of a MIXED binlog's bytes,
/// and this reads all of it; the ASCII check was a second pass over it): a high bit, `#`, `/*` or
/// `--` answers at once; a word is looked at only around a `c` or a `g` (any case), which SELECT
/// and RETURNING hold, so every word equal to one of them is met (the tests hold it to
/// `needs_python_reference`, byte by byte).
#[cfg(target_arch = "x86_64")]
pub(crate) fn needs_python(sql: &[u8]) -> bool {
    use std::arch::x86_64::*;
    let mut i = 0;
    // SAFETY: SSE2 is in every x86_64 CPU; each load reads 16 bytes of `sql`, at i and i + 1
    // with i + 17 <= sql.len(), unaligned.
    unsafe {
        let (hash, dash) = (_mm_set1_epi8(b'#' as i8), _mm_set1_epi8(b'-' as i8));
        let (slash, star) = (_mm_set1_epi8(b'/' as i8), _mm_set1_epi8(b'*' as i8));
        let (c, g, case) = (
            _mm_set1_epi8(b'c' as i8),
            _mm_set1_epi8(b'g' as i8),
            _mm_set1_epi8(0x20),
        );
        while i + 17 <= sql.len() {
            let v = _mm_loadu_si128(sql.as_ptr().add(i) as *const __m128i);
            let w = _mm_loadu_si128(sql.as_ptr().add(i + 1) as *const __m128i);
            let pairs = _mm_or_si128(
                _mm_and_si128(_mm_cmpeq_epi8(v, dash), _mm_cmpeq_epi8(w, dash)),
                _mm_and_si128(_mm_cmpeq_epi8(v, slash), _mm_cmpeq_epi8(w, star)),
            );
            // (a byte's high bit is its sign: movemask of `v` itself finds one outside ASCII)
            if _mm_movemask_epi8(_mm_or_si128(
                v,
                _mm_or_si128(_mm_cmpeq_epi8(v, hash), pairs),
            )) != 0
            {
                return true;
            }
            // `| 0x20` folds only C onto c (and G onto g), as in needs_python_from.
            let folded = _mm_or_si128(v, case);
            let mut letters = _mm_movemask_epi8(_mm_or_si128(
                _mm_cmpeq_epi8(folded, c),
                _mm_cmpeq_epi8(folded, g),
            )) as u32;
            while letters != 0 {
                if parser_word_at(sql, i + letters.trailing_zeros() as usize) {
                    return true;
                }
                letters &= letters - 1;
            }
            i += 16;
        }
    }
    needs_python_from(sql, i)
}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn needs_python(sql: &[u8]) -> bool {
    needs_python_from(sql, 0)
}

/// `needs_python` from sql[i] on, eight bytes at a time, then byte by byte.
fn needs_python_from(sql: &[u8], mut i: usize) -> bool {
    const CASE: u64 = 0x2020_2020_2020_2020;
    while i + 9 <= sql.len() {
        let v = u64::from_le_bytes(sql[i..i + 8].try_into().expect("8 bytes"));
        let w = u64::from_le_bytes(sql[i + 1..i + 9].try_into().expect("8 bytes"));
        if (v & 0x8080_8080_8080_8080)
            | bytes_eq(v, b'#')
            | (bytes_eq(v, b'-') & bytes_eq(w, b'-'))
            | (bytes_eq(v, b'/') & bytes_eq(w, b'*'))
            != 0
        {
            return true;
        }
        // `| 0x20` folds only C onto c (and G onto g): no other byte differs from them in bit 5 alone.
        let folded = v | CASE;
        let mut letters = bytes_eq(folded, b'c') | bytes_eq(folded, b'g');
        while letters != 0 {
            let at = i + (letters.trailing_zeros() / 8) as usize;
            if parser_word_at(sql, at) {
                return true;
            }
            letters &= letters - 1;
        }
        i += 8;
    }
    (i..sql.len()).any(|at| {
        let b = sql[at];
        b >= 0x80
            || b == b'#'
            || (b == b'/' && sql.get(at + 1) == Some(&b'*'))
            || (b == b'-' && sql.get(at + 1) == Some(&b'-'))
            || (matches!(b | 0x20, b'c' | b'g') && parser_word_at(sql, at))
    })
}

/// What the cues `needs_python` met in a text are once its string literals are skipped
/// (`outside_literals`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cues {
    /// No cue, or every cue inside a string literal: the text reads as one without any.
    Literal,
    /// SELECT words outside the literals, and no other cue (an INSERT's source query).
    Selects,
    /// A cue the core does not read past: the Python parser reads the text.
    Parser,
}

/// The cues of `sql` outside its string literals (`'...'`, `"..."`, with doubled quotes; the
/// literals of `_utf8mb4'...'`, `N'...'`, `X'...'` are such literals after a word), read again
/// after `needs_python` met one: a literal's text is a value to MySQL's lexer, whatever it holds
/// (`#`, `--`, `/*`, SELECT, UTF-8 text), so it names no table and hides no clause. Outside the
/// literals (backquoted names included) a cue or a byte outside ASCII is `Cues::Parser`, as in
/// `needs_python`; so is a literal whose end is not the same under every reading the server may
/// have had of it (`literal_end`), and an unclosed literal or backquoted name. A double-quoted
/// literal is a name under ANSI_QUOTES: the same span, read without escapes, which
/// `literal_end` holds equal.
pub(crate) fn outside_literals(sql: &[u8], literals: Literals) -> Cues {
    let n = sql.len();
    let mut selects = false;
    let mut name = false; // inside a backquoted name
    let mut i = 0;
    while i < n {
        let b = sql[i];
        match b {
            b'`' => {
                name = !name; // a doubled backquote closes and opens again: the same span
                i += 1;
            }
            b'\'' | b'"' if !name => match literal_end(sql, i, literals) {
                Some(end) => i = end,
                None => return Cues::Parser,
            },
            0x80..=0xff | b'#' => return Cues::Parser,
            b'/' if sql.get(i + 1) == Some(&b'*') => return Cues::Parser,
            b'-' if sql.get(i + 1) == Some(&b'-') => return Cues::Parser,
            _ if word(b) => {
                let from = i;
                while i < n && word(sql[i]) {
                    i += 1;
                }
                let w = &sql[from..i];
                if w.eq_ignore_ascii_case(b"RETURNING") {
                    return Cues::Parser;
                }
                selects |= w.eq_ignore_ascii_case(b"SELECT");
            }
            _ => i += 1,
        }
    }
    match (name, selects) {
        (true, _) => Cues::Parser,
        (false, true) => Cues::Selects,
        (false, false) => Cues::Literal,
    }
}

/// Just past the literal opening at sql[open] (a `'` or `"`; a doubled quote stays inside), where
/// it ends both with backslash escapes (MySQL's default, and the facts' lexer's reading) and
/// without (NO_BACKSLASH_ESCAPES in the Query's sql_mode; a name under ANSI_QUOTES), or None where
/// those differ (`'O\'Brien'`) or the literal is not closed. A backslash right after a byte
/// outside ASCII is None too: in a client character set such as sjis, gbk or big5 it may be the
/// second byte of a character, no escape (the bytes `' 0x95 \ \ '` are a character and an
/// escaped quote in sjis: an unclosed literal); after an ASCII byte it starts a character in
/// every character set a client may use. No byte of a character is a quote, so without a
/// backslash a quote ends the literal under every reading. Where the Query says how it was read
/// (`Literals`, from its sql_mode and client character set), a literal is read that way alone.
fn literal_end(sql: &[u8], open: usize, literals: Literals) -> Option<usize> {
    let q = sql[open];
    let mut i = open + 1;
    loop {
        let stop = quote_or_backslash(sql, i, q)?;
        if sql[stop] != q {
            break; // a backslash: both readings, byte by byte
        }
        if sql.get(stop + 1) != Some(&q) {
            return Some(stop + 1);
        }
        i = stop + 2;
    }
    // Past the closing quote, read with or without backslash escapes.
    let end = |escapes| quoted_end(sql, open, escapes);
    let escaped = end(true)?;
    let trail = |w: &[u8]| w[0] >= 0x80 && w[1] == b'\\';
    match literals {
        Literals::EscapedPlainBytes => Some(escaped),
        Literals::Escaped => (!sql[open + 1..escaped - 1].windows(2).any(trail)).then_some(escaped),
        Literals::Unknown => {
            let plain = end(false)?;
            (escaped == plain && !sql[open + 1..plain - 1].windows(2).any(trail)).then_some(plain)
        }
    }
}

/// Past the end of the quoted text opening at `start` (a string, or a name in backquotes; None:
/// it does not close): a doubled quote stays inside; with `escapes` (a string under the default
/// sql_mode; never a name) a backslash escapes the next byte.
pub(crate) fn quoted_end(sql: &[u8], start: usize, escapes: bool) -> Option<usize> {
    let q = sql[start];
    let mut i = start + 1;
    loop {
        match *sql.get(i)? {
            b'\\' if escapes => i += 2,
            c if c == q && sql.get(i + 1) == Some(&q) => i += 2,
            c if c == q => return Some(i + 1),
            _ => i += 1,
        }
    }
}

/// The first `q` or backslash of sql[from..], eight bytes at a time (a literal's text is most of
/// a DML text's bytes).
pub(crate) fn quote_or_backslash(sql: &[u8], mut i: usize, q: u8) -> Option<usize> {
    while i + 8 <= sql.len() {
        let v = u64::from_le_bytes(sql[i..i + 8].try_into().expect("8 bytes"));
        let m = bytes_eq(v, q) | bytes_eq(v, b'\\');
        if m != 0 {
            return Some(i + (m.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    (i..sql.len()).find(|&j| sql[j] == q || sql[j] == b'\\')
}

/// The high bit of each byte of `v` that equals `b`, and no other bit (no carry crosses bytes).
#[inline]
fn bytes_eq(v: u64, b: u8) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let x = v ^ (0x0101_0101_0101_0101u64 * b as u64);
    !(((x & LOW7) + LOW7) | x | LOW7)
}

/// Whether the word (maximal run of `\w` bytes) holding sql[at] is SELECT or RETURNING.
#[inline]
fn parser_word_at(sql: &[u8], at: usize) -> bool {
    let from = at - sql[..at].iter().rev().take_while(|b| word(**b)).count();
    let to = at + 1 + sql[at + 1..].iter().take_while(|b| word(**b)).count();
    let w = &sql[from..to];
    w.eq_ignore_ascii_case(b"SELECT") || w.eq_ignore_ascii_case(b"RETURNING")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `count` texts of fewer than `most` pieces each, drawn from `pieces` (the same texts on
    /// every run for a `seed`).
    fn texts<'a>(
        pieces: &'a [&'a [u8]],
        seed: u64,
        most: usize,
        count: usize,
    ) -> impl Iterator<Item = Vec<u8>> + 'a {
        let mut draw = crate::test_events::xorshift(seed);
        let mut next = move |n: usize| (draw() % n as u64) as usize;
        (0..count).map(move |_| {
            let n = next(most);
            (0..n)
                .flat_map(|_| pieces[next(pieces.len())])
                .copied()
                .collect()
        })
    }

    /// `needs_python` as first written: the ASCII check, then every word taken whole and compared.
    fn needs_python_reference(sql: &[u8]) -> bool {
        if !sql.is_ascii() {
            return true;
        }
        let mut i = 0;
        while i < sql.len() {
            let b = sql[i];
            if b == b'#'
                || (b == b'/' && sql.get(i + 1) == Some(&b'*'))
                || (b == b'-' && sql.get(i + 1) == Some(&b'-'))
            {
                return true;
            }
            if word(b) {
                let from = i;
                i += sql[i..].iter().take_while(|b| word(**b)).count();
                let w = &sql[from..i];
                if w.eq_ignore_ascii_case(b"SELECT") || w.eq_ignore_ascii_case(b"RETURNING") {
                    return true;
                }
                continue;
            }
            i += 1;
        }
        false
    }

    /// `outside_literals` by its definition: every literal's span under both readings, byte by
    /// byte (a doubled quote inside), then the cues of the text with the literals blanked.
    fn outside_literals_reference(sql: &[u8]) -> Cues {
        fn spans(sql: &[u8], escapes: bool) -> Option<Vec<(usize, usize)>> {
            let (mut out, mut name, mut i) = (Vec::new(), false, 0);
            while i < sql.len() {
                let b = sql[i];
                if b == b'`' {
                    name = !name;
                } else if !name && (b == b'\'' || b == b'"') {
                    let mut j = i + 1;
                    loop {
                        let c = *sql.get(j)?;
                        let doubled = c == b && sql.get(j + 1) == Some(&b);
                        if (escapes && c == b'\\') || doubled {
                            j += 2;
                        } else if c == b {
                            break;
                        } else {
                            j += 1;
                        }
                    }
                    out.push((i, j));
                    i = j;
                }
                i += 1;
            }
            (!name).then_some(out)
        }
        let (Some(escaped), Some(plain)) = (spans(sql, true), spans(sql, false)) else {
            return Cues::Parser;
        };
        let mixed =
            |&(o, c): &(usize, usize)| sql[o..c].windows(2).any(|w| w[0] >= 0x80 && w[1] == b'\\');
        if escaped != plain || escaped.iter().any(mixed) {
            return Cues::Parser;
        }
        let mut text = sql.to_vec();
        for &(o, c) in &escaped {
            text[o..=c].fill(b' ');
        }
        let has = |p: &[u8]| text.windows(p.len()).any(|w| w == p);
        if !text.is_ascii() || has(b"#") || has(b"--") || has(b"/*") {
            return Cues::Parser;
        }
        let words: Vec<&[u8]> = text.split(|b| !word(*b)).collect();
        if words.iter().any(|w| w.eq_ignore_ascii_case(b"RETURNING")) {
            Cues::Parser
        } else if words.iter().any(|w| w.eq_ignore_ascii_case(b"SELECT")) {
            Cues::Selects
        } else {
            Cues::Literal
        }
    }

    #[test]
    fn outside_literals_reads_as_its_definition() {
        let pieces: &[&[u8]] = &[
            b"'",
            b"''",
            b"\"",
            b"`",
            b"\\",
            b"\\'",
            b"\\\\",
            b"\\\"",
            b"select",
            b"SELECT",
            b"Returning",
            b"#",
            b"--",
            b"-",
            b"/*",
            b"/",
            b"*",
            b" ",
            b"x",
            b"_utf8mb4",
            b"N",
            b"UPDATE t SET a=",
            b"INSERT INTO t VALUES (",
            b")",
            b",",
            b"abcdefghijkl",
            "Jos\u{e9}".as_bytes(),
            "\u{e7}a va".as_bytes(),
            b"\x95",
            b"\xff",
        ];
        let (mut met, mut hidden) = ([0u32; 3], 0);
        for text in texts(pieces, 0x2545_f491_4f6c_dd1du64, 14, 300_000) {
            let want = outside_literals_reference(&text);
            assert_eq!(
                outside_literals(&text, Literals::Unknown),
                want,
                "{:?}",
                String::from_utf8_lossy(&text)
            );
            met[want as usize] += 1;
            hidden += (want == Cues::Literal && needs_python(&text)) as u32;
        }
        assert!(met.iter().all(|m| *m > 2000), "every answer met: {met:?}");
        assert!(hidden > 1000, "cues inside literals met: {hidden}");
    }

    #[test]
    fn literals_hide_their_cues() {
        for (sql, want) in [
            (
                &b"UPDATE t SET note='\xc3\xa7a va' WHERE id=3"[..],
                Cues::Literal,
            ),
            (
                b"INSERT INTO t VALUES ('a -- b', \"#\", '/* x */', 'select', _utf8mb4'\xc3\xa9')",
                Cues::Literal,
            ),
            (
                b"INSERT INTO t VALUES ('it''s', 'a\\nb', '{\\\"k\\\": 1}')",
                Cues::Literal,
            ),
            (b"INSERT INTO t SELECT 'returning' FROM u", Cues::Selects),
            (b"INSERT INTO t VALUES ('O\\'Brien -- x')", Cues::Parser),
            (b"INSERT INTO t VALUES ('\x95\\\\')", Cues::Parser),
            (b"INSERT INTO t VALUES ('\xc3\xa9 \\n')", Cues::Literal),
            (b"INSERT INTO t VALUES ('a') -- 'b'", Cues::Parser),
            (b"UPDATE `it's` SET a='#'", Cues::Literal),
            (b"UPDATE `x#` SET a='b'", Cues::Parser),
            (b"INSERT INTO t VALUES ('\xc3\xa9)", Cues::Parser),
            (b"UPDATE t\xc3\xa9 SET a='b'", Cues::Parser),
            (b"DELETE FROM t WHERE a='x' RETURNING a", Cues::Parser),
        ] {
            assert_eq!(
                outside_literals(sql, Literals::Unknown),
                want,
                "{:?}",
                String::from_utf8_lossy(sql)
            );
            assert_eq!(outside_literals_reference(sql), want);
        }
    }

    #[test]
    fn needs_python_reads_as_the_byte_by_byte_reference() {
        // Texts of pieces that hold or nearly hold what sends a statement to the parser (words
        // cut or joined at either end), at every offset against the eight-byte blocks; every text
        // is held to the reference.
        let pieces: &[&[u8]] = &[
            b"select",
            b"SELECT",
            b"SeLeCt",
            b"selec",
            b"selects",
            b"xselect",
            b"selectx",
            b"_select",
            b"select_",
            b"1select",
            b"sel",
            b"ect",
            b"s",
            b"returning",
            b"RETURNING",
            b"returnin",
            b"_returning",
            b"re",
            b"turning",
            b"r",
            b"-",
            b"--",
            b"/",
            b"/*",
            b"*/",
            b"*",
            b"#",
            b" ",
            b"\t",
            b"'",
            b"`",
            b"c",
            b"C",
            b"g",
            b"G",
            b"1",
            b"a",
            b"$",
            b"_",
            b"=",
            b"(",
            b".",
            b"\n",
            b"sbtest1",
            b"k=k+1",
            b"0123456789-",
            b"WHERE id=5",
            "\u{e9}".as_bytes(),
            "\u{17f}".as_bytes(),
            b"9",
            b"\x80",
            b"\xfe",
            b"\xff",
        ];
        let (mut hits, mut total) = (0, 0);
        for text in texts(pieces, 0x9e37_79b9_7f4a_7c15u64, 12, 200_000) {
            let want = needs_python_reference(&text);
            assert_eq!(
                needs_python(&text),
                want,
                "{:?}",
                String::from_utf8_lossy(&text)
            );
            hits += want as u32;
            total += 1;
        }
        assert!(
            hits > 1000 && hits < total - 1000,
            "both answers met: {hits} of {total}"
        );
        for text in [&b"INSERT INTO sbtest1 (id, k, c, pad) VALUES (0, 5, '83868641912-28773972837-60736120486', '67847967377')"[..], b"UPDATE t SET c='a--' WHERE id=1", b"UPDATE t SET a=1 RETURNING"] {
            assert_eq!(needs_python(text), needs_python_reference(text));
        }
    }
}
