//! OpenVEX documents (v0.2.0) of reports: a statement per vulnerability and
//! package, the product being the image and the package its subcomponent,
//! so Trivy and Grype users can feed the team's decisions to their scanners.

use serde_json::{Value, json};

use std::collections::BTreeMap;

use super::matching::{Evaluation, Statement};

/// The OpenVEX context this writes.
pub const CONTEXT: &str = "https://openvex.dev/ns/v0.2.0";

/// The image's product id: `pkg:oci/<name>@<digest>?repository_url=<url>`.
pub fn product_id(registry_host: &str, repo_path: &str, repo_name: &str, digest: &str) -> String {
    let name: String = repo_name.to_ascii_lowercase();
    let digest = digest.replace(':', "%3A");
    format!(
        "pkg:oci/{name}@{digest}?repository_url={registry_host}%2F{}",
        repo_path.replace('/', "%2F")
    )
}

/// One document for `(product, evaluation)` pairs, `timestamp` RFC 3339:
/// the same statement (vulnerability, status, decision, package) about
/// several images is one statement naming them all. `version` is the time
/// (milliseconds) of the newest report it holds: OpenVEX wants it larger
/// whenever the statements under the same `@id` change, and they change
/// only with a report. OpenVEX also wants at least one statement: callers
/// answer "no document" when no image has one.
pub fn document(id: &str, timestamp: &str, version: i64, images: &[(String, &Evaluation)]) -> Value {
    let mut grouped: BTreeMap<&Statement, Vec<&str>> = BTreeMap::new();
    for (product, eval) in images {
        for s in &eval.statements {
            grouped.entry(s).or_default().push(product);
        }
    }
    let mut statements = Vec::new();
    for (s, products) in grouped {
        {
            let products: Vec<Value> = products
                .iter()
                .map(|p| json!({ "@id": p, "subcomponents": [{ "@id": s.purl }] }))
                .collect();
            let mut st = json!({
                "vulnerability": { "name": s.id },
                "timestamp": timestamp,
                "products": products,
                "status": s.status,
            });
            if !s.aliases.is_empty() {
                st["vulnerability"]["aliases"] = json!(s.aliases);
            }
            match s.status.as_str() {
                "not_affected" => {
                    st["justification"] = json!(s.justification.as_deref().unwrap_or("vulnerable_code_not_present"));
                    if let Some(a) = &s.advisory {
                        st["impact_statement"] = json!(format!("determined a false positive in advisory {a}"));
                    }
                }
                "affected" => {
                    st["action_statement"] = json!(match &s.advisory {
                        Some(a) => format!("see advisory {a}; update the package when a fix is available"),
                        None => "update the package to a fixed version when one is available".to_owned(),
                    });
                }
                _ => {}
            }
            if let Some(a) = &s.advisory {
                st["status_notes"] = json!(format!("advisory {a}"));
            }
            statements.push(st);
        }
    }
    json!({
        "@context": CONTEXT,
        "@id": id,
        "author": "Ward",
        "timestamp": timestamp,
        "last_updated": timestamp,
        "version": version,
        "tooling": format!("ward {}", env!("CARGO_PKG_VERSION")),
        "statements": statements,
    })
}
