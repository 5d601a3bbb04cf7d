//! Tables and JSON.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ContentArrangement, Table};
use serde::Serialize;

pub fn json<T: Serialize>(v: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

pub fn table(header: &[&str], rows: Vec<Vec<String>>) {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.to_vec());
    for r in rows {
        t.add_row(r);
    }
    println!("{t}");
}

/// A timestamp as the API writes it (RFC 3339), or "" when absent.
pub fn time(t: Option<&ward_proto::Timestamp>) -> String {
    t.and_then(|t| serde_json::to_value(t).ok())
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}
