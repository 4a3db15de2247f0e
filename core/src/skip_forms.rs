//! What a skip policy sends in place of a skipped unit, made by the send walk
//! (`send::walk`) as it passes the unit: under the heartbeat policy one Heartbeat per skipped
//! stretch (`heartbeat.rs`); under the placeholder policy the unit's own framing with every other
//! event as a RAND placeholder; under the empty-transaction policy its GTID closed by a COMMIT
//! (MariaDB) or by BEGIN and COMMIT/XID (MySQL). `dumpfilter/skip_policy.py` says what each policy
//! is; these are the same bytes its `Placeholder.skipped` and `EmptyTransaction.skipped` (through
//! TransactionFilter's empty transaction) make, for the units the walk can make them for: MariaDB
//! units here, MySQL units (GTID and Anonymous_GTID, whose transaction_length is rewritten) in
//! `skip_forms/mysql.rs`. Any other unit ends the walk, and the caller's per-unit way sends what
//! its policy says.

use crate::crc::seal;
use crate::le::u32_at;
use crate::rows::{ROW_PARTIAL, ROW_SKIP};
use crate::scan::{F_COMPLETE, F_MARIADB_GTID};
use crate::sent::prefetch;
use crate::types::LOG_EVENT_SKIP_REPLICATION_F as SKIP_REPLICATION_F;
use crate::types::{
    ANONYMOUS_GTID, COMMIT_BODY, GTID, HEADER_LEN, MARIADB_FL_DDL, MARIADB_FL_STANDALONE,
    MARIADB_GTID,
};
use crate::unit_list::{ListedUnit, UnitList};

mod made_crc;
pub(crate) mod mysql;
mod placeholder;

use made_crc::made_query_into;
pub(crate) use made_crc::{made_query, made_query_len};
pub(crate) use placeholder::recorded as recorded_placeholders;
use placeholder::{framed_form, framed_run, placeholders, rand_len, stretch_pair};

pub use mysql::relayed_placeholders;

/// How a walk treats a skipped unit (`SendOptions::skip`); exported to Python as `_core.SKIP_*`,
/// the value each `SkipPolicy` passes.
pub const SKIP_STOP: u8 = 0; // it ends the walk: the caller sends what its policy says
pub const SKIP_HEARTBEAT: u8 = 1; // joins a skipped stretch, one Heartbeat before what is sent next
pub const SKIP_PLACEHOLDER: u8 = 2; // framing kept, every other event a RAND placeholder
pub const SKIP_EMPTY: u8 = 3; // the GTID with an empty body, closed by COMMIT

pub use crate::types::is_placeholder;
/// A RAND placeholder's body: the replaced event's size and type, as two u64 seeds.
const RAND_BODY: usize = 16;
/// The BEGIN Query opening a MySQL empty transaction whose unit has none of its own.
const BEGIN_BODY: &[u8] = b"\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00BEGIN";

/// What a unit is sent as under its skip policy: the policy's bytes and events (all of a skipped
/// unit's, as `SkipPolicy.tally` counts them; of a unit kept in part, its placeholders), of
/// those the RAND placeholders, and the master events sent as they are of a unit kept in part.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Form {
    pub bytes: u64,
    pub events: u64,
    pub placeholders: u64,
    pub kept_bytes: u64,
    pub kept_events: u64,
}

/// The form of skipped unit `u` (its bytes `buf[u.start..u.end]`) under `skip`, appended to
/// `out` unless `out` is None (counting); None where the walk cannot make it: not a complete unit
/// opened by a MariaDB GTID or a MySQL GTID / Anonymous_GTID (`mysql::skipped` says which MySQL
/// units), a statement unit under the placeholder policy without its framing (which of its
/// Queries are framing is the statement reader's to say), or bytes that do not hop as events.
/// `framing`: a statement unit's framing pieces (ranges of `buf`, from its keys:
/// `StmtUnits::kept_ranges`), for the placeholder policy.
pub fn skipped(
    u: &ListedUnit,
    buf: &[u8],
    skip: u8,
    crc: bool,
    runs: bool,
    framing: Option<&[(usize, usize)]>,
    out: Option<&mut Vec<u8>>,
) -> Option<Form> {
    let (raw, kind) = complete(u, buf)?;
    match kind {
        MARIADB_GTID if u.flags & F_MARIADB_GTID != 0 => {}
        GTID | ANONYMOUS_GTID => return mysql::skipped(u, raw, skip, crc, runs, framing, out),
        _ => return None,
    }
    match skip {
        SKIP_EMPTY => empty(raw, u32_at(raw, 9)? as usize, crc, None, out),
        // A statement unit's framing Queries are its keys' to say; of a row unit, or a lone
        // statement (a GTID and one Query, never a framing one), only the GTID and XID frame it.
        SKIP_PLACEHOLDER => {
            let kept = framing.or((u.tabled || u.events == 2).then_some(&[][..]))?;
            let mut out = out;
            match out.as_deref_mut() {
                Some(out) if runs => {
                    if let Some(form) = framed_run(raw, u, kept, crc, out) {
                        return Some(form);
                    }
                }
                Some(_) => {}
                None => {
                    if let Some((.., form)) = framed_form(raw, u, kept, crc) {
                        return Some(form);
                    }
                }
            }
            placeholders(raw, u.start(), kept, true, crc, runs, out)
        }
        _ => None,
    }
}

/// Unit `u`'s bytes in `buf` and its first event's type, where the unit is complete.
fn complete<'a>(u: &ListedUnit, buf: &'a [u8]) -> Option<(&'a [u8], u8)> {
    let raw = buf
        .get(u.start()..u.end())
        .filter(|_| u.flags & F_COMPLETE != 0)?;
    Some((raw, *raw.get(4)?))
}

/// Skipped unit `u` of `buf` under `skip` as a walk making stretches takes it
/// (`stretch::Stretch::take_unit`), without making its form: its GTID, its XID under the
/// placeholder policy, and its form's counts. None where its form is not those (a placeholder
/// form other than its GTID, a run and its XID; an empty one whose GTID it rewrites): `skipped`
/// then makes it. Made and taken apart again, a do-db slave's forms were a third of the master's
/// walk under the placeholder policy and half under the empty-transaction policy (callgrind).
pub fn stretch_unit<'a>(
    u: &ListedUnit,
    buf: &'a [u8],
    skip: u8,
    crc: bool,
    framing: Option<&[(usize, usize)]>,
) -> Option<StretchUnit<'a>> {
    let (raw, kind) = complete(u, buf)?;
    if u.flags & F_MARIADB_GTID == 0
        || kind != MARIADB_GTID
        || !matches!(skip, SKIP_EMPTY | SKIP_PLACEHOLDER)
    {
        return None;
    }
    if skip == SKIP_EMPTY {
        // (what `empty` makes, where it sends the GTID as it is: the stretch takes it whole)
        let gtid = raw.get(..u.gtid_size as usize)?;
        let crc_len = if crc { 4 } else { 0 };
        let plain = *gtid.get(HEADER_LEN + 12)? & (MARIADB_FL_STANDALONE | MARIADB_FL_DDL) == 0
            && gtid.len() >= HEADER_LEN + 13 + crc_len
            && u32_at(gtid, 9)? as usize == gtid.len();
        let bytes = (gtid.len() + made_query_len(COMMIT_BODY, crc)) as u64;
        let form = Form {
            bytes,
            events: 2,
            ..Form::default()
        };
        return plain.then_some(StretchUnit {
            gtid,
            xid: None,
            form,
        });
    }
    let kept = framing.or((u.tabled || u.events == 2).then_some(&[][..]))?;
    stretch_pair(raw, u, kept, crc).map(|(gtid, xid, form)| StretchUnit {
        gtid,
        xid: Some(xid),
        form,
    })
}

/// A skipped unit as a stretch takes it (`stretch_unit`): its GTID, its XID (None under the
/// empty-transaction policy: the slave closes it with a COMMIT), and its form's counts.
pub struct StretchUnit<'a> {
    pub gtid: &'a [u8],
    pub xid: Option<&'a [u8]>,
    pub form: Form,
}

/// Asks for the bytes of unit k that the walk reads to make its skip form (`skip`): the GTID's
/// cache lines for an empty transaction, the unit's (up to 2 KB) for placeholders, and for a
/// skipped unit sent as a run (`runs`) its head and its last event only, which are all that
/// `framed_run` reads. A unit kept whole is not asked for (`Sent::fill` asks for its bytes ahead
/// of its copy), nor one out of its buffer's bounds.
#[inline]
pub(crate) fn prefetch_form(
    plan: &UnitList,
    bufs: &[&[u8]],
    row: &[u8],
    k: usize,
    skip: u8,
    runs: bool,
) {
    let (Some(u), Some(&answer)) = (plan.units.get(k), row.get(k)) else {
        return;
    };
    if answer != ROW_SKIP && answer != ROW_PARTIAL {
        return;
    }
    let Some(raw) = bufs
        .get(u.part as usize)
        .and_then(|b| b.get(u.start()..u.end()))
    else {
        return;
    };
    if skip == SKIP_PLACEHOLDER && runs && answer == ROW_SKIP {
        prefetch(&raw[..raw.len().min(128)]);
        prefetch(
            raw.get(u.last().saturating_sub(u.start())..)
                .unwrap_or_default(),
        );
        return;
    }
    let reach = if skip == SKIP_EMPTY { 128 } else { 2048 };
    prefetch(&raw[..raw.len().min(reach)]);
}

/// Unit `u` kept in part under the placeholder policy: the events inside `kept` (ranges of
/// `buf`, in order) and its framing as they are, every other event a placeholder (a MySQL
/// unit's GTID with its transaction_length made anew: `mysql::with_placeholders`).
pub fn with_placeholders(
    u: &ListedUnit,
    buf: &[u8],
    kept: &[(usize, usize)],
    crc: bool,
    runs: bool,
    out: Option<&mut Vec<u8>>,
) -> Option<Form> {
    let (raw, kind) = complete(u, buf)?;
    match kind {
        MARIADB_GTID if u.flags & F_MARIADB_GTID != 0 => {
            placeholders(raw, u.start(), kept, false, crc, runs, out)
        }
        GTID | ANONYMOUS_GTID => mysql::with_placeholders(u, raw, kept, crc, runs, out),
        _ => None,
    }
}

/// The GTID as it is, then the COMMIT that closes it, dated and numbered as the GTID (the
/// synthesised statement has no master position of its own: TransactionFilter's
/// `_empty_transaction`); or with `at` as `filter` writes it at output offset `at`: each event's
/// log_pos its end offset there (but where the GTID's is 0: MariaDB 11.4+ in-group numbering),
/// the COMMIT's CRC made once.
pub(crate) fn empty(
    raw: &[u8],
    gtid_size: usize,
    crc: bool,
    at: Option<u64>,
    out: Option<&mut Vec<u8>>,
) -> Option<Form> {
    let form = empty_counts(raw.len(), gtid_size, crc)?;
    if let Some(out) = out {
        let (gtid, crc_len) = (&raw[..gtid_size], if crc { 4 } else { 0 });
        let commit = form.bytes as usize - gtid_size;
        // (read only where the form is made: a count reads no byte past the GTID's type)
        let log_pos = u32_at(gtid, 13)?;
        let (gtid_pos, commit_pos) = match at {
            Some(at) if log_pos != 0 => (at + gtid_size as u64, at + (gtid_size + commit) as u64),
            _ => (log_pos.into(), log_pos.into()),
        };
        let mut head = [0u8; HEADER_LEN]; // (what the COMMIT is dated and numbered with)
        head.copy_from_slice(&gtid[..HEADER_LEN]);
        head[13..17].copy_from_slice(&(commit_pos as u32).to_le_bytes());
        let flags2 = gtid[HEADER_LEN + 12];
        let standalone = MARIADB_FL_STANDALONE | MARIADB_FL_DDL;
        if flags2 & standalone != 0 || gtid_pos as u32 != log_pos {
            // A filtered DDL becomes an ordinary empty group closed by COMMIT: a standalone GTID
            // would make the applier take the COMMIT for a second group, and FL_DDL would make
            // parallel replication serialise around a statement that is gone.
            let at = out.len();
            out.extend_from_slice(&gtid[..gtid_size - crc_len]);
            out[at + HEADER_LEN + 12] = flags2 & !standalone;
            out[at + 13..at + 17].copy_from_slice(&(gtid_pos as u32).to_le_bytes());
            seal(out, at, crc);
        } else {
            out.extend_from_slice(gtid);
        }
        made_query(&head, COMMIT_BODY, crc, out);
    }
    Some(form)
}

/// What `empty` makes of a unit of `len` bytes opening with a GTID of `gtid_size`, counted: its
/// record alone says it (`count_forms::Forms` reads no byte of the unit).
#[inline]
pub(crate) fn empty_counts(len: usize, gtid_size: usize, crc: bool) -> Option<Form> {
    let crc_len = if crc { 4 } else { 0 };
    if gtid_size > len || gtid_size < HEADER_LEN + 13 + crc_len {
        return None;
    }
    Some(Form {
        bytes: (gtid_size + made_query_len(COMMIT_BODY, crc)) as u64,
        events: 2,
        ..Form::default()
    })
}

/// The empty transactions an empty-transaction stretch's GTIDs (`gtids`, whole events, as
/// `stretch::inner` read them) stand for, each GTID and its COMMIT, written into `out` (of
/// its GTIDs' bytes and a `made_query_len` per GTID: the relay run writes them straight into
/// what it hands back).
pub fn empty_transactions(gtids: &[u8], crc: bool, out: &mut [u8]) {
    let commit = made_query_len(COMMIT_BODY, crc);
    let (mut p, mut at) = (0, 0);
    while let Some(g) = u32_at(gtids, p + 9).and_then(|n| gtids.get(p..p + n as usize)) {
        let (made, next) = (at + g.len(), at + g.len() + commit);
        out[at..made].copy_from_slice(g);
        made_query_into(g, COMMIT_BODY, crc, &mut out[made..next]);
        (p, at) = (p + g.len().max(1), next);
    }
}

/// A test event of server_id 9 at `timestamp`, sealed (the MariaDB and MySQL forms' tests).
#[cfg(test)]
pub(crate) fn test_event(
    timestamp: u32,
    kind: u8,
    body: &[u8],
    log_pos: u32,
    crc: bool,
) -> Vec<u8> {
    let size = HEADER_LEN + body.len() + if crc { 4 } else { 0 };
    let mut e = crate::test_events::event_from(kind, 9, log_pos, body);
    e[..4].copy_from_slice(&timestamp.to_le_bytes());
    e[9..13].copy_from_slice(&(size as u32).to_le_bytes());
    seal(&mut e, 0, crc);
    e
}

/// A complete MariaDB unit for the tests, and its record: a GTID (flags2 `flags2`) at log_pos
/// 100, the `body` events (type, body, log_pos), an XID at `xid_pos`; `tabled`: a row unit.
#[cfg(test)]
pub(crate) fn test_unit(
    flags2: u8,
    body: &[(u8, &[u8], u32)],
    xid_pos: u32,
    tabled: bool,
    crc: bool,
) -> (Vec<u8>, ListedUnit) {
    let mut gtid = [0u8; 19];
    gtid[12] = flags2;
    let mut raw = test_event(7, MARIADB_GTID, &gtid, 100, crc);
    let g = raw.len();
    for &(kind, body, log_pos) in body {
        raw.extend(test_event(7, kind, body, log_pos, crc));
    }
    let last = raw.len();
    raw.extend(test_event(7, crate::types::XID, &[3; 8], xid_pos, crc));
    let u = ListedUnit {
        end: raw.len() as u32,
        last: last as u32,
        events: body.len() as u32 + 2,
        flags: F_COMPLETE | F_MARIADB_GTID,
        gtid_size: g as u32,
        tabled,
        ..Default::default()
    };
    (raw, u)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::F_COMPLETE;
    use crate::types::{PLACEHOLDER_RUN, QUERY, RAND};

    fn unit(flags2: u8, crc: bool) -> (Vec<u8>, ListedUnit) {
        test_unit(
            flags2,
            &[(19, &[1; 30], 150), (30, &[2; 40], 210)],
            240,
            true,
            crc,
        )
    }

    #[test]
    fn an_empty_transaction_is_the_gtid_and_a_commit_of_its_log_pos() {
        for crc in [false, true] {
            let (raw, u) = unit(0, crc);
            let mut out = Vec::new();
            let form = skipped(&u, &raw, SKIP_EMPTY, crc, false, None, Some(&mut out)).unwrap();
            assert_eq!(form.bytes as usize, out.len());
            assert_eq!(form.events, 2);
            assert_eq!(&out[..u.gtid_size as usize], &raw[..u.gtid_size as usize]);
            let commit = &out[u.gtid_size as usize..];
            assert_eq!(commit[4], QUERY);
            assert_eq!(u32_at(commit, 13), Some(100));
            assert_eq!(&commit[5..9], &raw[5..9]);
            assert!(commit.windows(6).any(|w| w == b"COMMIT"));
            if crc {
                assert_eq!(crc32fast::hash(commit), crate::crc::RESIDUE);
            }
            assert_eq!(
                skipped(&u, &raw, SKIP_EMPTY, crc, false, None, None),
                Some(form),
                "counting gives the same sizes"
            );
        }
    }

    #[test]
    fn placeholders_keep_the_framing_and_replace_the_rest() {
        let (raw, u) = unit(0, true);
        let mut out = Vec::new();
        let form = skipped(
            &u,
            &raw,
            SKIP_PLACEHOLDER,
            true,
            false,
            None,
            Some(&mut out),
        )
        .unwrap();
        assert_eq!((form.events, form.placeholders), (4, 2));
        assert_eq!(form.bytes as usize, out.len());
        let rand = &out[u.gtid_size as usize..u.gtid_size as usize + 39];
        assert_eq!(rand[4], RAND);
        assert_eq!(u32_at(rand, 13), Some(150));
        assert_eq!(crc32fast::hash(rand), crate::crc::RESIDUE);
        assert!(out.ends_with(&raw[raw.len() - 31..]), "the XID as it was");
    }

    #[test]
    fn what_the_walk_cannot_make_is_left_to_the_caller() {
        let (raw, u) = unit(0, false);
        let unflagged = ListedUnit {
            flags: F_COMPLETE,
            ..u.clone()
        };
        assert_eq!(
            skipped(&unflagged, &raw, SKIP_EMPTY, false, false, None, None),
            None
        );
        let statement = ListedUnit {
            tabled: false,
            ..u.clone()
        };
        assert_eq!(
            skipped(&statement, &raw, SKIP_PLACEHOLDER, false, false, None, None),
            None
        );
        let cut = &raw[..raw.len() - 3];
        assert_eq!(
            skipped(&u, cut, SKIP_PLACEHOLDER, false, false, None, None),
            None
        );
    }

    #[test]
    fn a_ddl_empty_transaction_is_an_ordinary_group() {
        let (raw, u) = unit(MARIADB_FL_STANDALONE | MARIADB_FL_DDL, true);
        let mut out = Vec::new();
        let form = skipped(&u, &raw, SKIP_EMPTY, true, false, None, Some(&mut out)).unwrap();
        let gtid = &out[..u.gtid_size as usize];
        assert_eq!(gtid[HEADER_LEN + 12], 0);
        assert_eq!(crc32fast::hash(gtid), crate::crc::RESIDUE);
        assert_eq!(form.bytes as usize, out.len());
    }

    /// Each event of `out` and what the runs among them stand for (as a slave's scanner counts).
    fn counted_back(out: &[u8]) -> (u64, crate::scan::RunCount) {
        let (mut events, mut runs, mut p) = (0, crate::scan::RunCount::default(), 0);
        while p < out.len() {
            let size = u32_at(out, p + 9).unwrap() as usize;
            runs.add(out, p, size, 0);
            events += 1;
            p += size;
        }
        (events, runs)
    }

    #[test]
    fn a_run_stands_for_the_placeholders_it_replaces() {
        for crc in [false, true] {
            let (raw, u) = unit(0, crc);
            let (mut full, mut runs, mut walked) = (Vec::new(), Vec::new(), Vec::new());
            let each = skipped(
                &u,
                &raw,
                SKIP_PLACEHOLDER,
                crc,
                false,
                None,
                Some(&mut full),
            );
            let run = skipped(&u, &raw, SKIP_PLACEHOLDER, crc, true, None, Some(&mut runs));
            let walk = placeholders(&raw, u.start(), &[], true, crc, true, Some(&mut walked));
            assert_eq!(each, run, "the counts are a replica's");
            assert_eq!(each, walk);
            assert_eq!(runs, walked, "the record's run is the walk's");
            let form = each.unwrap();
            assert_eq!(form.bytes as usize, full.len());
            let (events, stood) = counted_back(&runs);
            assert_eq!((events, events + stood.events), (3, form.events));
            assert_eq!(runs.len() as i64 + stood.bytes, full.len() as i64);
            assert_eq!(counted_back(&full).1, crate::scan::RunCount::default());
            let g = u.gtid_size as usize;
            let made = &runs[g..g + rand_len(crc)];
            assert!(is_placeholder(made, 0));
            assert_eq!(crate::types::placeholder_run(made, 0), Some(2));
            let xid = &raw[u.last()..];
            let start = u32_at(xid, 13).unwrap() - xid.len() as u32;
            assert_eq!(
                u32_at(made, 13),
                Some(start),
                "the run ends where the XID starts"
            );
            if crc {
                assert_eq!(crc32fast::hash(made), crate::crc::RESIDUE);
            }
            assert!(runs.ends_with(xid));
        }
    }

    #[test]
    fn a_statement_unit_framed_at_its_ends_is_one_run_as_the_walk_makes_it() {
        for crc in [false, true] {
            let (opening, statement) = (&[1u8; 20][..], &[2u8; 30][..]); // (its BEGIN, its statements)
            let body = [
                (QUERY, opening, 150),
                (QUERY, statement, 200),
                (QUERY, statement, 201),
                (QUERY, statement, 202),
            ];
            let (raw, u) = test_unit(0, &body, 400, false, crc);
            let (g, last) = (u.gtid_size as usize, u.last());
            let begin = (g, g + u32_at(&raw, g + 9).unwrap() as usize);
            // Its head as one piece: a BEGIN, the GTID and its BEGIN, or (MariaDB, whose GTID
            // opens the group) the GTID alone, its BEGIN then in the run.
            let end = (last, raw.len());
            for (head, holes) in [(begin, 3), ((0, begin.1), 3), ((0, g), 4)] {
                let kept = [head, end];
                let (mut made, mut walked) = (Vec::new(), Vec::new());
                let form = framed_run(&raw, &u, &kept, crc, &mut made).unwrap();
                let walk = placeholders(&raw, 0, &kept, true, crc, true, Some(&mut walked));
                assert_eq!((Some(form), &made), (walk, &walked));
                assert_eq!((form.events, form.placeholders), (6, holes));
                assert_eq!(crate::types::placeholder_run(&made, head.1), Some(holes));
            }
            let kept = [begin, end];
            let mut made = Vec::new();
            // A BEGIN piece that is not one event, or framing inside the body: the walk's.
            assert_eq!(
                framed_run(&raw, &u, &[(g, g + 10), kept[1]], crc, &mut made),
                None
            );
            assert_eq!(
                framed_run(&raw, &u, &[begin, (begin.1, last), kept[1]], crc, &mut made),
                None
            );
        }
    }

    #[test]
    fn a_run_of_one_is_the_placeholder_itself() {
        let (raw, u) = unit(0, true);
        let g = u.gtid_size as usize;
        let table_map = (g, g + u32_at(&raw, g + 9).unwrap() as usize);
        let (mut each, mut runs) = (Vec::new(), Vec::new());
        let a = with_placeholders(&u, &raw, &[table_map], true, false, Some(&mut each));
        let b = with_placeholders(&u, &raw, &[table_map], true, true, Some(&mut runs));
        assert_eq!((a, &each), (b, &runs));
        // Of an event whose type is the runs' mark, it is a run of one (what it stands for).
        let mut odd = raw.clone();
        odd[table_map.1 + 4] = PLACEHOLDER_RUN as u8;
        let mut marked = Vec::new();
        with_placeholders(&u, &odd, &[table_map], true, true, Some(&mut marked)).unwrap();
        let at = table_map.1;
        assert_eq!(crate::types::placeholder_run(&marked, at), Some(1));
        assert_eq!(crc32fast::hash(&marked[at..at + 39]), crate::crc::RESIDUE);
    }

    #[test]
    fn kept_in_part_the_kept_events_stay() {
        let (raw, u) = unit(0, false);
        let table_map = (u.gtid_size as usize, u.gtid_size as usize + 49);
        let mut out = Vec::new();
        let form = with_placeholders(&u, &raw, &[table_map], false, false, Some(&mut out)).unwrap();
        assert_eq!((form.placeholders, form.kept_events), (1, 3));
        assert_eq!((form.bytes + form.kept_bytes) as usize, out.len());
        assert_eq!(
            &out[table_map.0..table_map.1],
            &raw[table_map.0..table_map.1]
        );
    }
}
