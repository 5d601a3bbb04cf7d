//! `ward advisories export --format osv`: the OSV feed (`GET /osv/all.json`,
//! every document the caller may see) printed as one JSON array, or written
//! as `<id>.json` files into a directory. `--group` keeps the documents of
//! the advisories in that group or below it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use reqwest::Method;
use serde_json::Value;
use ward_proto::iam::v2::Group;

use super::{list, view};
use crate::resource;
use crate::{Client, Format, output};

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ExportFormat {
    /// OSV (https://ossf.github.io/osv-schema/).
    Osv,
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The document format.
    #[arg(long, value_enum, default_value_t = ExportFormat::Osv)]
    format: ExportFormat,
    /// Only advisories in this group or below it (name or uid).
    #[arg(short = 'g', long)]
    group: Option<String>,
    /// Write one `<id>.json` per document into this directory (made if
    /// missing) instead of printing a JSON array.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// Whether `id` is safe as a file name: letters, digits, `-`, `_` and `.`,
/// not starting with a dot (CGA ids are).
fn file_stem_ok(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('.')
        && id.len() <= 200
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// Writes `<id>.json` per document; the paths written.
fn write_files(dir: &Path, docs: &[Value]) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::with_capacity(docs.len());
    for doc in docs {
        let id = view::text(doc, "id");
        if !file_stem_ok(id) {
            bail!("the feed has a document whose id {id:?} cannot name a file");
        }
        let path = dir.join(format!("{id}.json"));
        let mut text = serde_json::to_string_pretty(doc)?;
        text.push('\n');
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

pub async fn run(client: &Client, format: Format, args: ExportArgs) -> anyhow::Result<()> {
    let ExportFormat::Osv = args.format;
    let feed: Value = client.call::<(), _>(Method::GET, "/osv/all.json", &[], None).await?;
    let Value::Array(mut docs) = feed else {
        bail!("the server's /osv/all.json is not a JSON array");
    };
    if let Some(group) = args.group {
        let group = resource::resolve_flag::<Group>(client, "--group", &group).await?;
        let query = vec![("uidp.descendantsOf", group)];
        let ids: HashSet<String> = list(client, &query, None)
            .await?
            .iter()
            .map(|a| view::advisory_id(a).to_owned())
            .collect();
        docs.retain(|d| ids.contains(view::text(d, "id")));
    }
    let Some(dir) = args.out else {
        return output::json(&docs);
    };
    let written = write_files(&dir, &docs)?;
    match format {
        Format::Json => output::json(&written.iter().map(|p| p.display().to_string()).collect::<Vec<_>>()),
        Format::Table => {
            output::line(&format!("wrote {} OSV document(s) to {}", written.len(), dir.display()));
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_ids_name_files() {
        assert!(file_stem_ok("CGA-3g3j-8396-2m48"));
        for bad in ["", "../etc/passwd", ".hidden", "a/b", "a\\b", "x\0y"] {
            assert!(!file_stem_ok(bad), "{bad:?}");
        }
    }

    #[test]
    fn writes_one_file_per_document() {
        let dir = tempfile::tempdir().unwrap();
        let docs = vec![
            serde_json::json!({"id": "CGA-3g3j-8396-2m48", "modified": "2025-01-01T00:00:00Z"}),
            serde_json::json!({"id": "CGA-5v4q-653x-xxff", "modified": "2025-01-02T00:00:00Z"}),
        ];
        let written = write_files(&dir.path().join("osv"), &docs).unwrap();
        assert_eq!(written.len(), 2);
        let back: Value = serde_json::from_str(&std::fs::read_to_string(&written[1]).unwrap()).unwrap();
        assert_eq!(back, docs[1]);
        assert!(write_files(dir.path(), &[serde_json::json!({"id": "../x"})]).is_err());
    }
}
