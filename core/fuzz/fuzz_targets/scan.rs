//! cargo fuzz target: any bytes through the scanner's walks (units and type walk, with and
//! without CRC checks, at every limit) and the payload decoders. A crash is a panic on input.
#![no_main]

use libfuzzer_sys::fuzz_target;

use _core::scan::{mariadb_uncompress, payload_bytes, Scanner};

fuzz_target!(|data: &[u8]| {
    let Some((&control, rest)) = data.split_first() else { return };
    // A binlog: the magic, then the input (the first byte picks the options).
    let mut buf = b"\xfebin".to_vec();
    buf.extend_from_slice(rest);
    let verify = control & 1 != 0;
    let limit = if control & 2 != 0 { 64 } else { usize::MAX };
    let out = Scanner::new(verify).units(&buf, 4, 0, limit, control & 4 != 0);
    assert!(out.stop <= buf.len());
    let mask = [true; 256];
    let (_, stop, _) = Scanner::new(verify).walk(&buf, 4, 0, &mask);
    assert!(stop <= buf.len());
    let _ = payload_bytes(rest, 1 << 16);
    let _ = mariadb_uncompress(rest);
});
