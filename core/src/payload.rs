//! Compressed event bodies: MySQL's Transaction_payload (zstd, lenenc-encoded header) and
//! MariaDB's compressed field (zlib, Query_compressed and the compressed rows events).

use crate::le::packed;

/// MariaDB's compressed field: a header byte (0x80 | length bytes), the big-endian length, zlib.
pub fn mariadb_uncompress(buf: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let Some(&header) = buf.first() else {
        return Err("empty compressed field".into());
    };
    let n = (header & 7) as usize;
    if header & 0x80 == 0 || !(1..=4).contains(&n) {
        return Err(format!("bad MariaDB compression header 0x{header:02x}"));
    }
    if (header >> 4) & 7 != 0 {
        return Err(format!(
            "unknown MariaDB compression algorithm {}",
            (header >> 4) & 7
        ));
    }
    let Some(len_bytes) = buf.get(1..1 + n) else {
        return Err("compressed field too short".into());
    };
    let expected = len_bytes.iter().fold(0usize, |a, b| a << 8 | *b as usize);
    // Never trust the header for the allocation: read at most expected + 1 bytes.
    let mut out = Vec::with_capacity(expected.min(1 << 20));
    let mut dec = flate2::read::ZlibDecoder::new(&buf[1 + n..]).take(expected as u64 + 1);
    dec.read_to_end(&mut out)
        .map_err(|e| format!("does not decompress: {e}"))?;
    if out.len() != expected {
        return Err(format!(
            "compressed field holds {} bytes, header says {expected}",
            out.len()
        ));
    }
    Ok(out)
}

/// Decompresses a MySQL Transaction_payload event's body (the fields are lenenc-encoded, then
/// the zstd frame) into the inner events' bytes. `max_out` bounds the allocation.
pub fn payload_bytes(body: &[u8], max_out: usize) -> Result<Vec<u8>, String> {
    let mut i = 0;
    let mut compression = 255u64;
    let mut uncompressed = 0u64;
    while i < body.len() {
        let field = body[i];
        i += 1;
        if field == 0 {
            break;
        }
        let (len, at) = packed(body, i).ok_or("Transaction_payload header is truncated")?;
        let (value, _) = packed(body, at).ok_or("Transaction_payload header is truncated")?;
        i = at
            .checked_add(len as usize)
            .ok_or("Transaction_payload field length overflows")?;
        match field {
            2 => compression = value,
            3 => uncompressed = value,
            _ => {}
        }
    }
    let data = body.get(i..).unwrap_or(&[]);
    match compression {
        255 => Ok(data.to_vec()),
        0 => {
            let cap = (uncompressed as usize).min(max_out).max(1);
            let mut out = Vec::new();
            let mut dec =
                zstd::stream::read::Decoder::new(data).map_err(|e| format!("zstd: {e}"))?;
            use std::io::Read;
            (&mut dec)
                .take(cap as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| format!("Transaction_payload does not decompress: {e}"))?;
            if out.len() > cap {
                return Err(format!("Transaction_payload holds more than {cap} bytes"));
            }
            Ok(out)
        }
        other => Err(format!(
            "unknown Transaction_payload compression type {other}"
        )),
    }
}
