//! Which statement texts the core leaves to Python (`needs_python`): a byte outside ASCII, or
//! a cue of `rules.statements._NEEDS_PARSER` (a SELECT or RETURNING word, a comment opener)
//! anywhere in the text, found in one pass over it, sixteen or eight bytes at a time (a
//! statement's text is most of a MIXED binlog's bytes). `stmt::dml_shape` asks it first.

/// `\b`'s word characters in ASCII text.
#[inline]
pub(crate) fn word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether the core leaves this statement's text to Python: a byte outside ASCII (Python's
/// Unicode rules bite there: case folding, `\s`, `\b`), or `_NEEDS_PARSER` (`\bSELECT\b|/\*|#|--|
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
    for at in i..sql.len() {
        let b = sql[at];
        if b >= 0x80
            || b == b'#'
            || (b == b'/' && sql.get(at + 1) == Some(&b'*'))
            || (b == b'-' && sql.get(at + 1) == Some(&b'-'))
            || (matches!(b | 0x20, b'c' | b'g') && parser_word_at(sql, at))
        {
            return true;
        }
    }
    false
}

/// Whether every cue `needs_python` found in `sql` is a SELECT word: ASCII text with no `#`,
/// `/*`, `--` or RETURNING word. Read only for an INSERT whose text met a cue (rare: byte by byte).
pub(crate) fn cues_are_selects(sql: &[u8]) -> bool {
    if !sql.is_ascii() {
        return false;
    }
    let mut i = 0;
    while i < sql.len() {
        let b = sql[i];
        let next = sql.get(i + 1).copied();
        if b == b'#' || (b == b'/' && next == Some(b'*')) || (b == b'-' && next == Some(b'-')) {
            return false;
        }
        if word(b) {
            let from = i;
            while i < sql.len() && word(sql[i]) {
                i += 1;
            }
            if sql[from..i].eq_ignore_ascii_case(b"RETURNING") {
                return false;
            }
            continue;
        }
        i += 1;
    }
    true
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
    let mut from = at;
    while from > 0 && word(sql[from - 1]) {
        from -= 1;
    }
    let mut to = at + 1;
    while to < sql.len() && word(sql[to]) {
        to += 1;
    }
    let w = &sql[from..to];
    w.eq_ignore_ascii_case(b"SELECT") || w.eq_ignore_ascii_case(b"RETURNING")
}

#[cfg(test)]
mod tests {
    use super::*;

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
                while i < sql.len() && word(sql[i]) {
                    i += 1;
                }
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

    #[test]
    fn the_cue_scan_finds_what_the_word_scan_finds() {
        let parts: &[&[u8]] = &[
            b"select",
            b"SeLeCt",
            b"returning",
            b"RETURNING",
            b"xselect",
            b"selectx",
            b"s",
            b"r",
            b"_select",
            b"select_",
            b"1select",
            b"-",
            b"--",
            b"/",
            b"/*",
            b"*/",
            b"#",
            b" ",
            b"(",
            b"'",
            b"sbtest1",
            b"re",
            b"sel",
            b"9",
            b"\t",
            b"ect",
            b"turning",
            "\u{e9}".as_bytes(),
            b"\x80",
            b"\xff",
        ];
        let mut seed = 0x2387_u64;
        for _ in 0..200_000 {
            let mut sql = Vec::new();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut x = seed;
            for _ in 0..(x % 7) {
                x /= 7;
                sql.extend_from_slice(parts[(x % parts.len() as u64) as usize]);
                x /= parts.len() as u64;
            }
            assert_eq!(
                needs_python(&sql),
                needs_python_reference(&sql),
                "{:?}",
                String::from_utf8_lossy(&sql)
            );
        }
    }

    #[test]
    fn needs_python_reads_as_the_byte_by_byte_reference() {
        // Texts of pieces that hold or nearly hold what sends a statement to the parser, at
        // every offset against the eight-byte blocks; every text is held to the reference.
        let pieces: &[&[u8]] = &[
            b"select",
            b"SELECT",
            b"SeLeCt",
            b"selec",
            b"selects",
            b"xselect",
            b"returning",
            b"RETURNING",
            b"returnin",
            b"_returning",
            b"-",
            b"--",
            b"/",
            b"/*",
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
            b"\x80",
            b"\xfe",
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let (mut hits, mut texts) = (0, 0);
        for _ in 0..200_000 {
            let mut text = Vec::new();
            for _ in 0..next(12) {
                text.extend_from_slice(pieces[next(pieces.len())]);
            }
            let want = needs_python_reference(&text);
            assert_eq!(
                needs_python(&text),
                want,
                "{:?}",
                String::from_utf8_lossy(&text)
            );
            hits += want as u32;
            texts += 1;
        }
        assert!(
            hits > 1000 && hits < texts - 1000,
            "both answers met: {hits} of {texts}"
        );
        for text in [&b"INSERT INTO sbtest1 (id, k, c, pad) VALUES (0, 5, '83868641912-28773972837-60736120486', '67847967377')"[..], b"UPDATE t SET c='a--' WHERE id=1", b"UPDATE t SET a=1 RETURNING"] {
            assert_eq!(needs_python(text), needs_python_reference(text));
        }
    }
}
