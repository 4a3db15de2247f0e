//! Reads a binlog through the MySQL replication protocol with the `mysql` crate and prints each
//! row change on one line: `KIND db.table VALUES` (an update: `before -> after`).
//! Usage: rust-binlog HOST PORT USER SERVER_ID FILE POS
use std::collections::HashMap;

use mysql::binlog::events::{EventData, RowsEventData, TableMapEvent};
use mysql::binlog::row::BinlogRow;
use mysql::binlog::value::BinlogValue;
use mysql::{BinlogDumpFlags, BinlogRequest, Conn, OptsBuilder};

fn row_text(row: &BinlogRow) -> String {
    let values: Vec<String> = (0..row.len())
        .map(|i| match row.as_ref(i) {
            Some(BinlogValue::Value(v)) => v.as_sql(false),
            Some(other) => format!("{:?}", other),
            None => "-".to_string(),
        })
        .collect();
    format!("[{}]", values.join(", "))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 7 {
        eprintln!("usage: rust-binlog HOST PORT USER SERVER_ID FILE POS");
        std::process::exit(2);
    }
    let opts = OptsBuilder::new()
        .ip_or_hostname(Some(args[1].clone()))
        .tcp_port(args[2].parse().expect("PORT"))
        .user(Some(args[3].clone()))
        .pass(Some(""))
        .prefer_socket(false);
    let conn = Conn::new(opts).unwrap_or_else(|e| {
        eprintln!("connect: {e}");
        std::process::exit(1)
    });
    let request = BinlogRequest::new(args[4].parse().expect("SERVER_ID"))
        .with_filename(args[5].as_bytes().to_vec())
        .with_pos(args[6].parse::<u64>().expect("POS"))
        .with_flags(BinlogDumpFlags::BINLOG_DUMP_NON_BLOCK);
    let stream = conn.get_binlog_stream(request).unwrap_or_else(|e| {
        eprintln!("dump: {e}");
        std::process::exit(1)
    });
    let mut tables: HashMap<u64, TableMapEvent<'static>> = HashMap::new();
    for event in stream {
        let event = event.unwrap_or_else(|e| {
            eprintln!("read: {e}");
            std::process::exit(1)
        });
        let data = match event.read_data() {
            Ok(Some(data)) => data,
            Ok(None) => continue,
            Err(e) => {
                eprintln!("event type {:?} at {}: {e}", event.header().event_type_raw(), event.header().log_pos());
                std::process::exit(1)
            }
        };
        match data {
            EventData::TableMapEvent(tme) => {
                tables.insert(tme.table_id(), tme.into_owned());
            }
            EventData::RowsEvent(rows) => {
                let tme = tables.get(&rows.table_id()).expect("a rows event after its Table_map");
                let kind = match rows {
                    RowsEventData::WriteRowsEvent(_) | RowsEventData::WriteRowsEventV1(_) => "Write",
                    RowsEventData::UpdateRowsEvent(_) | RowsEventData::UpdateRowsEventV1(_) => "Update",
                    RowsEventData::DeleteRowsEvent(_) | RowsEventData::DeleteRowsEventV1(_) => "Delete",
                    _ => "Other",
                };
                for row in rows.rows(tme) {
                    let (before, after) = row.expect("a row image");
                    let text = match (before, after) {
                        (Some(b), Some(a)) => format!("{} -> {}", row_text(&b), row_text(&a)),
                        (Some(b), None) => row_text(&b),
                        (None, Some(a)) => row_text(&a),
                        (None, None) => "[]".to_string(),
                    };
                    println!("{} {}.{} {}", kind, tme.database_name(), tme.table_name(), text);
                }
            }
            _ => {}
        }
    }
}
