//! CRC32s checked a run of events at a time (see `crc::Run`), on a second thread for large
//! buffers, with a fall-back to one by one that gives the exact error and offset.

use std::sync::mpsc::channel;

use super::{Scanner, RUNS_PER_SEND};
use crate::crc::{crc_ok, Run};

impl Scanner {
    /// Adds a common event's CRC check to the open run (a new run where it is not contiguous
    /// or full, after checking the old one).
    #[inline(always)]
    pub(super) fn run_add(&mut self, buf: &[u8], pos: usize, nxt: usize) {
        if pos == self.run.end && self.run.fits(nxt) {
            self.run.add(nxt);
        } else {
            self.run_restart(buf, pos, nxt);
        }
    }

    /// `run_add` for an event that does not join the open run.
    #[cold]
    #[inline(never)]
    fn run_restart(&mut self, buf: &[u8], pos: usize, nxt: usize) {
        self.run_check(buf);
        self.run = Run::at(pos);
        if !self.run.fits(nxt) {
            // An event too large for a run: checked alone (SIMD speed at this size).
            if !crc_ok(&buf[pos..nxt]) {
                self.run_bad = true;
            }
            self.run = Run::at(nxt);
            return;
        }
        self.run.add(nxt);
    }

    fn run_check(&mut self, buf: &[u8]) {
        if !self.run.is_empty() {
            if self.run_sink.is_some() {
                self.run_batch.push(self.run);
                if self.run_batch.len() >= RUNS_PER_SEND {
                    self.send_runs();
                }
            } else if !self.run.check(buf) {
                self.run_bad = true;
            }
        }
        self.run = Run::at(self.run.end);
    }

    fn send_runs(&mut self) {
        if let Some(sink) = &self.run_sink {
            let runs = std::mem::take(&mut self.run_batch);
            // A send fails only once the checker has found a bad run and stopped: run_bad follows.
            let _ = sink.send(runs);
        }
    }

    /// `scan` with its closed runs checked on a second thread as they come; true when every
    /// run's CRC is right.
    fn scan_pipelined<T>(&mut self, buf: &[u8], scan: &impl Fn(&mut Self) -> T) -> (T, bool) {
        std::thread::scope(|s| {
            let (sink, runs) = channel::<Vec<Run>>();
            let checker =
                s.spawn(move || runs.iter().all(|batch| batch.iter().all(|r| r.check(buf))));
            self.run_sink = Some(sink);
            let out = scan(self);
            self.run_check(buf);
            self.send_runs();
            self.run_sink = None; // closes the channel: the checker ends after the last batch
            (out, checker.join().unwrap_or(false))
        })
    }

    /// Whether common events' CRCs go to runs now (verifying, batched, a checksummed format):
    /// what `check` finds out per event, asked once per walk and again after each special event.
    #[inline]
    pub(super) fn runs_on(&self) -> bool {
        self.verify && self.batch_crc && self.fmt.as_ref().is_some_and(|f| f.checksum_len != 0)
    }

    /// Runs `scan` with CRCs checked a run at a time; if a run holds a bad CRC, runs it again
    /// from the same state checking event by event, so that the answer (units, the error and
    /// its offset) is exactly the one-by-one check's.
    pub(super) fn batched<T>(
        &mut self,
        buf: &[u8],
        off: usize,
        scan: impl Fn(&mut Self) -> T,
    ) -> T {
        if !(self.verify && self.batch_crc) {
            return scan(self);
        }
        let (fmt, walked) = (self.fmt.clone(), self.events_walked);
        self.run = Run::at(off);
        self.run_bad = false;
        let out = if buf.len().saturating_sub(off) >= self.pipeline_min {
            let (out, good) = self.scan_pipelined(buf, &scan);
            self.run_bad |= !good;
            out
        } else {
            let out = scan(self);
            self.run_check(buf);
            out
        };
        if !self.run_bad {
            return out;
        }
        self.fmt = fmt;
        self.events_walked = walked;
        self.run_bad = false;
        self.batch_crc = false;
        let out = scan(self);
        self.batch_crc = true;
        out
    }
}
