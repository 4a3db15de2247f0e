//! What a walk over a segment sends (`Sent`; split's routing walk writes one per output): its
//! counters, and what it sends as pieces, each a stretch of a part's buffer (kept units, where
//! they lie) or of bytes it made (Heartbeats, skip forms, units kept in part), copied into their
//! place once (`Sent::fill`).

/// A stretch of what a call sends, in order (`Sent::pieces`): bytes of a part's buffer (kept
/// units, copied once, where they go) or of `Sent::own` (Heartbeats, units kept in part).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece {
    Buf { part: u32, start: usize, end: usize },
    Own { start: usize, end: usize },
}

#[derive(Debug, Default)]
pub struct Sent {
    /// What the call sends as pieces (`walk`), `out_len` bytes in all.
    pub pieces: Vec<Piece>,
    pub own: Vec<u8>,
    pub out_len: usize,
    /// The first unit not handled.
    pub next: usize,
    pub kept: u64,
    pub partial: u64,
    pub skipped: u64,
    /// Master event bytes and events sent (kept units and the kept part of partial ones).
    pub sent_bytes: u64,
    pub sent_events: u64,
    /// Bytes and events of the units handled.
    pub read_bytes: u64,
    pub read_events: u64,
    pub heartbeats: u64,
    pub heartbeat_bytes: u64,
    /// Skipped units sent in their skip policy's form (placeholders, empty transactions), and
    /// the events and bytes of those forms, of which `placeholders` RAND placeholders.
    pub skip_units: u64,
    pub skip_events: u64,
    pub skip_bytes: u64,
    pub placeholders: u64,
    /// The unit whose end a Heartbeat is still owed for, if any.
    pub pending: Option<usize>,
    /// Whether the caller's pending Heartbeat was sent or replaced.
    pub pending_done: bool,
    /// Statements per key id over the statement units handled (their rule hits).
    pub key_counts: Vec<u32>,
}

/// How many pieces ahead `fill` asks for the source's cache lines. A do-db slave of eight schemas
/// is sent one unit in eight, about 1 KB each, out of pages no cache holds: each copy waited on
/// memory. A C loop copying that pattern out of the bench's binlog ran at 4.3 GB/s (14 GB/s
/// copying it all), 5.9 GB/s asking eight pieces ahead; eight do-db streams in process spent
/// 10% less in `UnitList.send`.
const PREFETCH_AHEAD: usize = 8;

/// Asks for the cache lines of `src` (at most 2 KB of it) ahead of the copy.
#[inline]
pub(crate) fn prefetch(src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let n = src.len().min(2048);
        let mut off = 0;
        while off < n {
            // SAFETY: a prefetch never faults; the address lies inside `src`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(src.as_ptr().add(off) as *const i8) };
            off += 64;
        }
    }
}

impl Sent {
    /// Copies the pieces into `dst` (`out_len` bytes: what the walk sends, assembled). The
    /// Python binding fills the bytes object it hands back, so each kept byte is copied once
    /// (it was copied into a Vec, then again into the bytes: a full copy of all that is sent).
    pub fn fill(&self, bufs: &[&[u8]], dst: &mut [u8]) {
        let mut at = 0;
        let slice = |piece: &Piece| match *piece {
            Piece::Buf { part, start, end } => &bufs[part as usize][start..end],
            Piece::Own { start, end } => &self.own[start..end],
        };
        for (k, piece) in self.pieces.iter().enumerate() {
            if let Some(ahead) = self.pieces.get(k + PREFETCH_AHEAD) {
                prefetch(slice(ahead));
            }
            let src = slice(piece);
            dst[at..at + src.len()].copy_from_slice(src);
            at += src.len();
        }
        debug_assert_eq!(at, dst.len(), "a walk's fill writes every byte it counted");
    }
}

/// Calls `$m!` with the arguments given and then `Sent`'s counters (the u64s a walk adds up):
/// the one list `Sent::add` and the Python result (`SendResult`) name them by.
macro_rules! counters {
    ($m:ident!($($arg:tt)*)) => {
        $m!($($arg)* kept partial skipped sent_bytes sent_events read_bytes read_events heartbeats
            heartbeat_bytes skip_units skip_events skip_bytes placeholders)
    };
}
#[cfg(feature = "python")] // (python::sent::send_result)
pub(crate) use counters;

impl Sent {
    /// Adds the counters of `t` (a walk's part of this one's units).
    pub(crate) fn add(&mut self, t: &Sent) {
        macro_rules! add {
            ($s:ident $t:ident $($f:ident)*) => {$($s.$f += $t.$f;)*};
        }
        counters!(add!(self t));
    }

    /// A walk's Sent: tallies for `keys` key ids, and `room` bytes made up front for what it
    /// makes.
    pub(crate) fn for_walk(keys: usize, room: usize) -> Sent {
        Sent {
            key_counts: vec![0; keys],
            own: Vec::with_capacity(room),
            ..Default::default()
        }
    }

    pub(crate) fn buf_piece(&mut self, part: u32, start: usize, end: usize) {
        if let Some(Piece::Buf {
            part: p, end: e, ..
        }) = self.pieces.last_mut()
        {
            if *p == part && *e == start {
                *e = end; // kept units that follow one another: one piece
                self.out_len += end - start;
                return;
            }
        }
        self.pieces.push(Piece::Buf { part, start, end });
        self.out_len += end - start;
    }

    pub(crate) fn own_piece(&mut self, bytes: &[u8]) {
        let start = self.own.len();
        self.own.extend_from_slice(bytes);
        self.own_range(start);
    }

    /// The ranges `parts` of `buf`, joined, as the next piece.
    pub(crate) fn own_parts(&mut self, buf: &[u8], parts: &[(usize, usize)]) {
        let start = self.own.len();
        for &(a, b) in parts {
            self.own.extend_from_slice(&buf[a..b]);
        }
        self.own_range(start);
    }

    /// own[start..] (just appended) as the next piece.
    pub(crate) fn own_range(&mut self, start: usize) {
        self.own_span(start, self.own.len());
    }

    /// own[start..end] as the next piece (joined to the last one where it follows it in `own`).
    pub(crate) fn own_span(&mut self, start: usize, end: usize) {
        if let Some(Piece::Own { end: e, .. }) = self.pieces.last_mut() {
            if *e == start {
                *e = end;
                self.out_len += end - start;
                return;
            }
        }
        self.pieces.push(Piece::Own { start, end });
        self.out_len += end - start;
    }
}
