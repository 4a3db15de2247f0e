//! A unit list's GTIDs, as the scanner read them (MariaDB's domain, server_id and seq_no; a MySQL
//! gno in `seq`), kept in runs: one run per source for a binlog one primary wrote, however many
//! units, where they took 16 bytes of every unit's record.

/// From unit `from` on, (domain, server, seq + step per unit), up to the next run's `from`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Run {
    seq: u64,
    from: u32,
    domain: u32,
    server: u32,
    /// 0 (a source's units all alike, an anonymous MySQL GTID's 0) or 1 once the run has a
    /// second unit; u32::MAX before.
    step: u32,
}

#[derive(Debug, Clone, Default)]
pub struct UnitGtids {
    runs: Vec<Run>,
}

impl UnitGtids {
    /// Unit k's (domain, server, seq), k the next unit: in the last run where it follows on,
    /// else in a run of its own.
    pub fn push(&mut self, k: u32, domain: u32, server: u32, seq: u64) {
        if let Some(run) = self.runs.last_mut() {
            if (run.domain, run.server) == (domain, server) {
                let step = seq.wrapping_sub(run.seq);
                if run.step == u32::MAX && k == run.from + 1 && step <= 1 {
                    run.step = step as u32;
                    return;
                }
                let at = u64::from(run.step).wrapping_mul(u64::from(k - run.from));
                if run.step != u32::MAX && run.seq.wrapping_add(at) == seq {
                    return;
                }
            }
        }
        let (from, step) = (k, u32::MAX);
        self.runs.push(Run {
            seq,
            from,
            domain,
            server,
            step,
        });
    }

    /// Unit k's (domain, server, seq); None before the first unit pushed (k past the last one
    /// pushed reads on in the last run: the caller bounds k).
    pub fn get(&self, k: usize) -> Option<(u32, u32, u64)> {
        let at = self.runs.partition_point(|r| r.from as usize <= k);
        let run = self.runs.get(at.checked_sub(1)?)?;
        let step = if run.step == u32::MAX { 0 } else { run.step };
        let off = (k - run.from as usize) as u64;
        Some((
            run.domain,
            run.server,
            run.seq.wrapping_add(u64::from(step).wrapping_mul(off)),
        ))
    }

    /// The runs as (first unit, (domain, server)), in order.
    pub fn sources(&self) -> impl Iterator<Item = (usize, (u32, u32))> + '_ {
        self.runs
            .iter()
            .map(|r| (r.from as usize, (r.domain, r.server)))
    }

    pub fn heap_bytes(&self) -> usize {
        self.runs.capacity() * std::mem::size_of::<Run>()
    }
}
