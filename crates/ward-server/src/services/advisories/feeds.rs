//! Advisory feeds: OSV records of any ecosystem (PyPI, npm, Go, …) imported
//! as their publishers wrote them. A record is kept byte for byte, one per
//! (group, id); a version with a later `modified` replaces it, one with
//! `withdrawn` withdraws it, and an older or identical one changes nothing,
//! so re-importing a feed is idempotent. Feed records are data about public
//! packages: the importing organization reads them (and anonymous readers
//! where `--public-advisories` makes the group public), at `/osv/<id>.json`.
//! They are not Ward advisories: they carry no review and are not in the
//! `/osv/all.*` exports of Ward's own advisories.

use serde_json::Value;
use sha2::{Digest as _, Sha256};
use ward_core::rpc;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::vulnerabilities::v1::{
    AdvisoryFlag, AdvisoryFlags, GetAdvisoryFlagsRequest, ImportOsvRequest, ImportResponse, import_result::Outcome,
};
use ward_store::advisories::{ADVISORY_TYPE, FeedOutcome, FeedPackage, FeedRecord};

use super::import::{count, result};
use crate::authz::Caller;
use crate::ward::Ward;

/// Most records one request may carry.
pub const MAX_RECORDS: usize = 1000;
/// Largest record, in bytes of JSON.
pub const MAX_RECORD_BYTES: usize = 1024 * 1024;
/// Longest record id (OSV ids are short: `PYSEC-2021-19`, `GHSA-…`).
pub const MAX_ID: usize = 128;
/// Most aliases and affected packages one record may list.
pub const MAX_RECORD_LIST: usize = 1000;
/// Longest alias, ecosystem or package name.
pub const MAX_RECORD_NAME: usize = 512;
/// Most aliases and packages all records of one request may list together:
/// each is an index row, and one request's rows are written while other
/// writes wait.
pub const MAX_INDEX_ROWS: usize = 20_000;
/// Records stored per transaction.
const STORE_CHUNK: usize = 100;
/// How far ahead `modified` and `withdrawn` may be: a record dated far in
/// the future could never be updated by its feed again.
const MAX_AHEAD_MS: i64 = 24 * 60 * 60 * 1000;

/// The kind named in NOT_FOUND answers for a feed record.
pub const FEED_RECORD_TYPE: &str = "osv record";

/// Whether `id` is an OSV id Ward keeps: ASCII letters, digits and `-._:`,
/// at most [`MAX_ID`] bytes. It appears in paths (`/osv/<id>.json`), so the
/// names that path gives other meanings are not ids: `all` (the exports)
/// and CGA ids (Ward's own advisories).
pub fn is_record_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b':'))
        && !id.starts_with('.')
        && !id.eq_ignore_ascii_case("all")
        && !ward_core::advisory::is_cga(id)
}

fn millis(field: &str, v: &Value, now_ms: i64) -> std::result::Result<i64, String> {
    let s = v
        .as_str()
        .ok_or_else(|| format!("`{field}` must be an RFC 3339 time string"))?;
    let ms = chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| t.timestamp_millis())
        .map_err(|_| format!("`{field}` is not an RFC 3339 time: {:?}", ward_core::names::echo(s)))?;
    if ms > now_ms.saturating_add(MAX_AHEAD_MS) {
        return Err(format!("`{field}` is more than a day in the future"));
    }
    Ok(ms)
}

/// A string Ward indexes: safe text (no control, bidirectional-override or
/// zero-width characters) of at most [`MAX_RECORD_NAME`] bytes.
fn bounded_str<'a>(v: &'a Value, what: &str) -> std::result::Result<&'a str, String> {
    let Some(s) = v.as_str() else {
        return Err(format!("{what} must be a string"));
    };
    let mut bad = Vec::new();
    ward_core::names::check_text(what, s, MAX_RECORD_NAME, &mut bad);
    match bad.first() {
        None => Ok(s),
        Some(v) => Err(v.description.clone()),
    }
}

/// Checks one record and reads what Ward indexes from it. The error is the
/// reason it is refused (with its id when it has a usable one).
pub fn parse_record(parent_uid: &str, body: String, now_ms: i64) -> std::result::Result<FeedRecord, (String, String)> {
    if body.len() > MAX_RECORD_BYTES {
        return Err((
            String::new(),
            format!("a record is larger than {MAX_RECORD_BYTES} bytes"),
        ));
    }
    let v: Value = serde_json::from_str(&body).map_err(|e| (String::new(), format!("not JSON: {e}")))?;
    let Some(o) = v.as_object() else {
        return Err((String::new(), "an OSV record is a JSON object".into()));
    };
    let id = match o.get("id").and_then(Value::as_str) {
        Some(id) if is_record_id(id) => id.to_owned(),
        Some(id) => {
            return Err((
                String::new(),
                format!(
                    "id {:?} is not an OSV feed id (letters, digits and -._: only, at most {MAX_ID} bytes; \
                     not `all` nor a CGA id)",
                    ward_core::names::echo(id)
                ),
            ));
        }
        None => return Err((String::new(), "an OSV record needs an `id` string".into())),
    };
    let fail = |reason: String| (id.clone(), reason);
    let modified = millis("modified", o.get("modified").unwrap_or(&Value::Null), now_ms).map_err(fail)?;
    let withdrawn = match o.get("withdrawn") {
        None | Some(Value::Null) => None,
        Some(w) => Some(millis("withdrawn", w, now_ms).map_err(fail)?),
    };
    let mut aliases = Vec::new();
    if let Some(list) = o.get("aliases").filter(|a| !a.is_null()) {
        let list = list
            .as_array()
            .ok_or_else(|| fail("`aliases` must be an array".into()))?;
        if list.len() > MAX_RECORD_LIST {
            return Err(fail(format!("more than {MAX_RECORD_LIST} aliases")));
        }
        for a in list {
            let a = bounded_str(a, "an alias").map_err(fail)?;
            if !aliases.iter().any(|x| x == a) {
                aliases.push(a.to_owned());
            }
        }
    }
    let mut packages: Vec<(String, String, Vec<Value>)> = Vec::new();
    if let Some(list) = o.get("affected").filter(|a| !a.is_null()) {
        let list = list
            .as_array()
            .ok_or_else(|| fail("`affected` must be an array".into()))?;
        if list.len() > MAX_RECORD_LIST {
            return Err(fail(format!("more than {MAX_RECORD_LIST} affected packages")));
        }
        for a in list {
            let Some(p) = a.get("package").filter(|p| !p.is_null()) else {
                continue;
            };
            let ecosystem = bounded_str(
                p.get("ecosystem").unwrap_or(&Value::Null),
                "affected[].package.ecosystem",
            )
            .map_err(fail)?;
            let name = bounded_str(p.get("name").unwrap_or(&Value::Null), "affected[].package.name").map_err(fail)?;
            // Only what decides whether the record applies to a version.
            let mut entry = serde_json::Map::new();
            for k in ["ranges", "versions"] {
                if let Some(x) = a.get(k).filter(|x| !x.is_null()) {
                    entry.insert(k.to_owned(), x.clone());
                }
            }
            // A PyPI project is also indexed under its PEP 503 name, the
            // one an image's package is looked up by (`jw.util` is
            // `jw-util`).
            let mut names = vec![name.to_owned()];
            if ecosystem.eq_ignore_ascii_case("pypi") {
                let normalized = crate::services::vulns::matching::normalize_pypi(name);
                if normalized != name {
                    names.push(normalized);
                }
            }
            for name in names {
                match packages.iter_mut().find(|(e, n, _)| e == ecosystem && *n == name) {
                    Some((_, _, entries)) => entries.push(Value::Object(entry.clone())),
                    None => packages.push((ecosystem.to_owned(), name, vec![Value::Object(entry.clone())])),
                }
            }
        }
    }
    // Of the record's content, not its bytes: the same record as another
    // file renders it (YAML converted, pretty or compact JSON) is unchanged.
    let canonical = serde_json::to_string(&v).map_err(|e| (id.clone(), format!("not JSON: {e}")))?;
    let digest = hex::encode(Sha256::digest(canonical.as_bytes()));
    Ok(FeedRecord {
        parent_uid: parent_uid.to_owned(),
        id,
        modified,
        withdrawn,
        aliases,
        packages: packages
            .into_iter()
            .map(|(ecosystem, name, entries)| FeedPackage {
                ecosystem,
                name,
                affected: Value::Array(entries).to_string(),
            })
            .collect(),
        body,
        digest,
    })
}

/// The body of one store transaction's `…osv.imported.v1` event: how many
/// records each outcome had, and the ids of those that changed (a rerun of
/// a whole feed is mostly unchanged records, which are only counted).
fn import_event_body(ids: &[String], outcomes: &[FeedOutcome]) -> Value {
    let name = |o: &FeedOutcome| match o {
        FeedOutcome::Created => "CREATED",
        FeedOutcome::Updated => "UPDATED",
        FeedOutcome::Withdrawn => "WITHDRAWN",
        FeedOutcome::Unchanged => "UNCHANGED",
    };
    let mut counts = serde_json::Map::new();
    for o in outcomes {
        let n = counts.entry(name(o)).or_insert(Value::from(0u64));
        *n = Value::from(n.as_u64().unwrap_or(0) + 1);
    }
    let results: Vec<Value> = ids
        .iter()
        .zip(outcomes)
        .filter(|(_, o)| **o != FeedOutcome::Unchanged)
        .map(|(id, o)| serde_json::json!({"recordId": id, "outcome": name(o)}))
        .collect();
    serde_json::json!({"counts": counts, "results": results})
}

impl Ward {
    pub async fn import_osv(&self, caller: &Caller, req: ImportOsvRequest) -> Result<ImportResponse> {
        let parent = Uidp::parse("parent_id", &req.parent_id)?;
        self.authorize(caller, &rpc::IMPORT_OSV, &parent)?;
        self.authorize(caller, &rpc::IMPORT_OSV_UPDATE, &parent)?;
        if req.records.len() > MAX_RECORDS {
            return Err(Error::invalid(
                "records",
                format!("at most {MAX_RECORDS} records per request"),
            ));
        }
        let source: String = req.source.chars().take(1024).collect();
        let parent_uid = parent.as_str().to_owned();
        let now = self.clock.now_millis();
        // Parsing up to 16 MiB of JSON is CPU work: off the async workers.
        let parsed = tokio::task::spawn_blocking(move || {
            req.records
                .into_iter()
                .map(|body| parse_record(&parent_uid, body, now))
                .collect::<Vec<_>>()
        })
        .await
        .map_err(Error::internal)?;
        let mut resp = ImportResponse::default();
        let mut records = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut rows = 0;
        for p in parsed {
            match p {
                Ok(r) if !seen.insert(r.id.clone()) => resp.results.push(result(
                    &source,
                    &r.id,
                    Outcome::Rejected,
                    "the request carries this record twice".into(),
                )),
                Ok(r) if rows + r.aliases.len() + r.packages.len() > MAX_INDEX_ROWS => {
                    resp.results.push(result(
                        &source,
                        &r.id,
                        Outcome::Rejected,
                        format!(
                            "the request's records list more than {MAX_INDEX_ROWS} aliases and packages \
                             together; send this one in another request"
                        ),
                    ));
                }
                Ok(r) => {
                    rows += r.aliases.len() + r.packages.len();
                    records.push(r);
                }
                Err((id, why)) => resp.results.push(result(&source, &id, Outcome::Rejected, why)),
            }
        }
        if req.dry_run {
            for r in &records {
                resp.results
                    .push(result(&source, &r.id, Outcome::Unspecified, String::new()));
            }
        } else {
            // Short transactions: other writes wait for each one.
            let mut outcomes = Vec::with_capacity(records.len());
            for chunk in records.chunks(STORE_CHUNK) {
                let ids: Vec<String> = chunk.iter().map(|r| r.id.clone()).collect();
                let emit = self.rendered(
                    caller,
                    crate::services::events::types::OSV_IMPORTED,
                    parent.as_str(),
                    parent.as_str(),
                    move |outcomes: &Vec<FeedOutcome>| import_event_body(&ids, outcomes),
                );
                outcomes.extend(
                    self.store
                        .import_feed_records(parent.as_str(), chunk, self.clock.now_millis(), emit)
                        .await?,
                );
            }
            let changed: Vec<String> = outcomes
                .iter()
                .zip(&records)
                .filter(|(o, _)| **o != FeedOutcome::Unchanged)
                .flat_map(|(_, r)| r.packages.iter().map(|p| p.name.clone()))
                .collect();
            if !changed.is_empty() {
                // Once per run of imports: a queued tidy-up merges them.
                self.enqueue(vec![(crate::services::vulns::TIDY.to_owned(), "feeds".to_owned())])
                    .await;
            }
            self.on_advisories_changed(parent.as_str(), changed).await;
            for (o, r) in outcomes.into_iter().zip(&records) {
                let outcome = match o {
                    FeedOutcome::Created => Outcome::Created,
                    FeedOutcome::Updated => Outcome::Updated,
                    FeedOutcome::Withdrawn => Outcome::Withdrawn,
                    FeedOutcome::Unchanged => Outcome::Unchanged,
                };
                resp.results.push(result(&source, &r.id, outcome, String::new()));
            }
        }
        count(&mut resp);
        Ok(resp)
    }

    /// A feed record's body as imported, by id. The caller's own groups
    /// (where it may list advisories) come first, then the public ones
    /// (`--public-advisories`); within each, the first by group uid. Only
    /// the groups holding the id are read before the choice, and only the
    /// chosen record's body after it.
    pub async fn feed_record(&self, caller: Option<&Caller>, id: &str) -> Result<String> {
        let not_found = || Error::not_found(FEED_RECORD_TYPE, id);
        if !is_record_id(id) {
            return Err(not_found());
        }
        let own: Option<Option<Vec<Uidp>>> = caller.map(|c| self.visible_scopes(c, rpc::LIST_ADVISORIES.capability));
        let within = |scopes: &[Uidp], parent: &str| {
            scopes.iter().any(|g| {
                parent == g.as_str()
                    || parent
                        .strip_prefix(g.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
            })
        };
        let groups = self.store.feed_record_groups(id).await?;
        let chosen = groups
            .iter()
            .find(|p| match &own {
                Some(None) => true,
                Some(Some(scopes)) => within(scopes, p),
                None => false,
            })
            .or_else(|| groups.iter().find(|p| within(&self.public_advisories, p)));
        let Some(parent) = chosen else {
            return Err(not_found());
        };
        self.store.feed_record_body(parent, id).await?.ok_or_else(not_found)
    }

    pub async fn get_advisory_flags(&self, caller: &Caller, req: GetAdvisoryFlagsRequest) -> Result<AdvisoryFlags> {
        let uid = Uidp::parse("id", &req.id)?;
        let a = self.authorized_advisory(caller, &rpc::GET_ADVISORY_FLAGS, &uid).await?;
        if a.delete_time.is_some() {
            return Err(Error::not_found(ADVISORY_TYPE, uid.as_str()));
        }
        let flags = self.store.advisory_flags(&a.uid).await?;
        Ok(AdvisoryFlags {
            id: a.uid,
            advisory_id: a.advisory_id,
            flags: flags
                .into_iter()
                .map(|f| AdvisoryFlag {
                    code: f.code,
                    field: f.field,
                    detail: f.detail,
                })
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_checked_and_indexed() {
        let body = r#"{"id":"PYSEC-2021-19","modified":"2021-03-01T12:00:00Z","aliases":["CVE-2021-1","CVE-2021-1","GHSA-x"],
            "affected":[{"package":{"ecosystem":"PyPI","name":"Pillow"},"ranges":[{"type":"ECOSYSTEM","events":[{"introduced":"0"},{"fixed":"8.1.1"}]}]},
                        {"package":{"ecosystem":"PyPI","name":"Pillow"}}]}"#;
        let now = 1_800_000_000_000;
        let r = parse_record("g", body.to_owned(), now).unwrap();
        assert_eq!(r.id, "PYSEC-2021-19");
        assert_eq!(r.body, body, "kept byte for byte");
        assert_eq!(r.aliases, ["CVE-2021-1", "GHSA-x"]);
        assert_eq!(
            r.packages,
            ["Pillow", "pillow"].map(|name| FeedPackage {
                ecosystem: "PyPI".into(),
                name: name.into(),
                affected: r#"[{"ranges":[{"events":[{"introduced":"0"},{"fixed":"8.1.1"}],"type":"ECOSYSTEM"}]},{}]"#
                    .into(),
            }),
            "both entries' ranges, nothing else; under the name as written and its PEP 503 form"
        );
        assert_eq!(r.modified, 1_614_600_000_000);
        assert_eq!(r.withdrawn, None);

        let w = parse_record(
            "g",
            r#"{"id":"A-1","modified":"2021-03-01T12:00:00Z","withdrawn":"2021-04-01T00:00:00.5+02:00"}"#.into(),
            now,
        )
        .unwrap();
        assert_eq!(w.withdrawn, Some(1_617_228_000_500));

        for (bad, why) in [
            ("[]", "a JSON object"),
            ("{", "not JSON"),
            (r#"{"modified":"2021-03-01T12:00:00Z"}"#, "needs an `id`"),
            (
                r#"{"id":"../x","modified":"2021-03-01T12:00:00Z"}"#,
                "not an OSV feed id",
            ),
            (
                r#"{"id":"all","modified":"2021-03-01T12:00:00Z"}"#,
                "not an OSV feed id",
            ),
            (
                r#"{"id":"CGA-f73f-594w-h296","modified":"2021-03-01T12:00:00Z"}"#,
                "not an OSV feed id",
            ),
            (r#"{"id":"A-1","modified":"9999-12-31T23:59:59Z"}"#, "in the future"),
            (
                r#"{"id":"A-1","modified":"2021-03-01T12:00:00Z","aliases":["CVE-\u0000"]}"#,
                "control",
            ),
            (
                r#"{"id":"A-1","modified":"2021-03-01T12:00:00Z","affected":[{"package":{"ecosystem":"PyPI","name":"a\u202eb"}}]}"#,
                "control",
            ),
            (r#"{"id":"A-1"}"#, "`modified`"),
            (r#"{"id":"A-1","modified":"yesterday"}"#, "not an RFC 3339"),
            (
                r#"{"id":"A-1","modified":"2021-03-01T12:00:00Z","aliases":"x"}"#,
                "`aliases` must be an array",
            ),
            (
                r#"{"id":"A-1","modified":"2021-03-01T12:00:00Z","affected":[{"package":{"name":1}}]}"#,
                "must be a string",
            ),
        ] {
            let (_, reason) = parse_record("g", bad.into(), now).unwrap_err();
            assert!(reason.contains(why), "{bad}: {reason}");
        }
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(
            parse_record("g", deep, now).is_err(),
            "deep nesting is refused, not a stack overflow"
        );
    }

    #[test]
    fn record_ids() {
        for ok in [
            "PYSEC-2021-19",
            "GHSA-jfh8-c2jp-5v3q",
            "openSUSE-SU-2024:1234-1",
            "RUSTSEC-2020_1.x",
        ] {
            assert!(is_record_id(ok), "{ok}");
        }
        for bad in [
            "",
            ".hidden",
            "a/b",
            "a b",
            "a%2f",
            "all",
            "ALL",
            "CGA-f73f-594w-h296",
            &"x".repeat(MAX_ID + 1),
        ] {
            assert!(!is_record_id(bad), "{bad}");
        }
    }
}
