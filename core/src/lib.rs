//! dumpfilter's compiled core: the per-event byte work (the scanner) behind one Python
//! extension module, `dumpfilter._core`. Semantics stay in Python; this crate only walks bytes.

pub mod assemble;
pub mod body_reach;
pub mod count_forms;
pub mod count_walk;
pub mod crc;
pub mod facts;
pub mod flags;
pub mod format;
pub mod gate_reach;
pub mod gate_reads;
pub mod gtid_runs;
pub mod heartbeat;
pub mod hops;
pub mod keep;
pub mod le;
pub mod lone_class;
pub mod lone_sums;
pub mod payload;
pub mod relay;
pub mod rename_db;
pub mod replica;
pub mod rows;
pub mod scan;
pub mod send;
pub mod sent;
pub mod skip_forms;
pub mod split;
pub mod split_mysql;
pub mod sql;
pub mod stmt;
pub mod stmt_columns;
pub mod stmt_cues;
pub mod stmt_keys;
pub mod stmt_units;
pub mod stretch;
pub mod tally;
pub mod trx_length;
pub mod types;
pub mod unit_cut;
pub mod unit_gtids;
pub mod unit_list;

#[cfg(test)]
mod stretch_tests;
#[cfg(test)]
mod test_events;

#[cfg(feature = "python")]
mod python;
#[cfg(feature = "stubs")]
pub use python::stubs::stub_info;
