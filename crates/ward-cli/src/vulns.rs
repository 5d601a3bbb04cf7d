//! `ward registry vulns <image>`, `ward registry vulns affected <id>`,
//! `ward registry sbom <image>` and `ward advisories vex --image <image>`:
//! an image's vulnerability report, the images a vulnerability affects, an
//! image's inventory and its OpenVEX document.

use anyhow::{Context as _, bail};
use reqwest::Method;
use serde_json::Value;
use ward_proto::iam::v2::Group;
use ward_proto::registry::v2::{Repo, Tag};

use crate::resource;
use crate::{Client, Format, output};

/// How long a command waits for a report still being computed.
const WAIT: std::time::Duration = std::time::Duration::from_secs(120);

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct VulnsArgs {
    #[command(subcommand)]
    cmd: Option<VulnsCommand>,
    /// The image: `[registry/][org/]repo:tag` or `…@sha256:…` (repo by name or uid).
    image: Option<String>,
}

#[derive(Debug, clap::Subcommand)]
pub enum VulnsCommand {
    /// Every image (repo, tags, digest) affected by a vulnerability id or alias.
    Affected {
        /// CVE-…, GHSA-…, CGA-…, PYSEC-…
        id: String,
    },
}

/// An image reference split into its organization (name or uid, when
/// given), repo (name or uid) and tag or digest.
fn split_image(image: &str) -> anyhow::Result<(Option<String>, String, String)> {
    let (path, reference) = if let Some((p, d)) = image.split_once('@') {
        // `repo:tag@sha256:…`: the digest names the image, the tag is a
        // reminder (as docker and skopeo read it).
        let slash = p.rfind('/').map_or(0, |i| i + 1);
        let p = p[slash..].rfind(':').map_or(p, |i| &p[..slash + i]);
        (p, d.to_owned())
    } else {
        let slash = image.rfind('/').map_or(0, |i| i + 1);
        match image[slash..].rfind(':') {
            Some(i) => (&image[..slash + i], image[slash + i + 1..].to_owned()),
            None => (image, "latest".to_owned()),
        }
    };
    let mut parts: Vec<&str> = path.split('/').collect();
    // A registry host (has a dot or a port) and the organization lead.
    if parts.len() > 1 && (parts[0].contains('.') || parts[0].contains(':') || parts[0] == "localhost") {
        parts.remove(0);
    }
    let mut org = None;
    if parts.len() > 1 && !ward_core::uidp::Uidp::is_valid(&parts.join("/")) {
        org = Some(parts.remove(0).to_owned());
    }
    if parts.is_empty() || parts[0].is_empty() {
        bail!("{image}: name an image as [registry/][org/]repo:tag or repo@sha256:…");
    }
    Ok((org, parts.join("/"), reference))
}

/// The repo uid and digest of an image reference.
async fn resolve_image(client: &Client, image: &str) -> anyhow::Result<(String, String)> {
    let (org, repo, reference) = split_image(image)?;
    let repo = match org {
        // The organization as `/v2/` reads it (by uid, or by name among
        // organizations), then its repo of that name.
        Some(org) => {
            let org = if ward_core::uidp::Uidp::is_valid(&org) {
                org
            } else {
                let q = vec![("name", org.clone()), ("uidp.in_root", "true".to_owned())];
                let found: Vec<Group> = resource::list(client, &q).await?;
                match found.as_slice() {
                    [one] => one.uid.clone(),
                    [] => bail!("{image}: no organization named {org}"),
                    _ => bail!("{image}: organization name {org} is ambiguous; use its uid"),
                }
            };
            let q = vec![("uidp.children_of", org.clone()), ("name", repo.clone())];
            let found: Vec<Repo> = resource::list(client, &q).await?;
            match found.into_iter().next() {
                Some(r) => r.uid,
                None => bail!("{image}: the organization has no repo {repo}"),
            }
        }
        None => resource::resolve::<Repo>(client, &repo)
            .await
            .context("the image's repo")?,
    };
    if reference.starts_with("sha256:") || reference.starts_with("sha512:") {
        return Ok((repo, reference));
    }
    let q = vec![("uidp.children_of", repo.clone()), ("name", reference.clone())];
    let tags: Vec<Tag> = resource::list(client, &q).await?;
    match tags.into_iter().next() {
        Some(t) if !t.digest.is_empty() => Ok((repo, t.digest)),
        _ => bail!("{image}: the repo has no tag {reference}"),
    }
}

/// GETs `path`, waiting while the server says the report is being computed.
async fn get_waiting(client: &Client, path: &str, query: &[(&str, String)]) -> anyhow::Result<Value> {
    let start = std::time::Instant::now();
    loop {
        match client.call::<(), Value>(Method::GET, path, query, None).await {
            Err(e) if e.to_string().contains("(HTTP 503)") && start.elapsed() < WAIT => {
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
            other => return other,
        }
    }
}

const SEVERITIES: &[&str] = &["CRITICAL", "HIGH", "MEDIUM", "LOW", "UNKNOWN"];

fn s<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or("")
}

pub async fn run(client: &Client, format: Format, args: VulnsArgs) -> anyhow::Result<()> {
    match (args.cmd, args.image) {
        (Some(VulnsCommand::Affected { id }), _) => affected(client, format, &id).await,
        (None, Some(image)) => report(client, format, &image).await,
        (None, None) => bail!("name an image (ward registry vulns IMAGE) or use `affected ID`"),
    }
}

async fn report(client: &Client, format: Format, image: &str) -> anyhow::Result<()> {
    let (repo, digest) = resolve_image(client, image).await?;
    let r = get_waiting(
        client,
        &format!("/registry/v1/repos/{repo}/digests/{digest}/vulnreport"),
        &[],
    )
    .await?;
    if format == Format::Json {
        return output::json(&r);
    }
    let mut rows: Vec<(usize, Vec<String>)> = Vec::new();
    for m in r
        .get("vulnerabilityMatches")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let sev = s(m, "/vulnerability/severity");
        let sev = if sev.is_empty() { "UNKNOWN" } else { sev };
        let rank = SEVERITIES.iter().position(|x| *x == sev).unwrap_or(SEVERITIES.len());
        let fix: Vec<&str> = m
            .pointer("/fix/versions")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let decided: Vec<String> = m
            .pointer("/vulnerability/advisories")
            .and_then(Value::as_object)
            .map(|o| {
                o.iter()
                    .map(|(k, v)| format!("{k}: {}", v.as_str().unwrap_or("")))
                    .collect()
            })
            .unwrap_or_default();
        rows.push((
            rank,
            vec![
                sev.to_owned(),
                s(m, "/vulnerability/id").to_owned(),
                s(m, "/pkg/name").to_owned(),
                s(m, "/pkg/version").to_owned(),
                fix.join(", "),
                s(m, "/fix/state").to_owned(),
                decided.join("; "),
            ],
        ));
    }
    rows.sort_by(|a, b| (a.0, &a.1[1], &a.1[2]).cmp(&(b.0, &b.1[1], &b.1[2])));
    let n = rows.len();
    output::table(
        &[
            "SEVERITY",
            "ID",
            "PACKAGE",
            "VERSION",
            "FIXED IN",
            "FIX STATE",
            "ADVISORIES",
        ],
        rows.into_iter().map(|(_, r)| r).collect(),
    );
    let mut counts: Vec<String> = Vec::new();
    for sev in SEVERITIES {
        let c = r
            .get("vulnerabilityMatches")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter(|m| {
                        let v = s(m, "/vulnerability/severity");
                        v == *sev || (v.is_empty() && *sev == "UNKNOWN")
                    })
                    .count()
            })
            .unwrap_or(0);
        if c > 0 {
            counts.push(format!("{c} {}", sev.to_lowercase()));
        }
    }
    let data = match s(&r, "/vulnerabilityDbLastBuildTime") {
        "" => "no advisory data names its packages".to_owned(),
        t => format!("advisory data as of {t}"),
    };
    eprintln!(
        "{n} matches{} in {digest}; {data}",
        if counts.is_empty() {
            String::new()
        } else {
            format!(" ({})", counts.join(", "))
        },
    );
    Ok(())
}

async fn affected(client: &Client, format: Format, id: &str) -> anyhow::Result<()> {
    let mut items: Vec<Value> = Vec::new();
    let mut token = String::new();
    loop {
        let mut q = vec![("id", id.to_owned()), ("page_size", "100".to_owned())];
        if !token.is_empty() {
            q.push(("page_token", token.clone()));
        }
        let page: Value = client
            .call::<(), Value>(Method::GET, "/registry/v1/vuln_reports/affected", &q, None)
            .await?;
        items.extend(page.get("items").and_then(Value::as_array).cloned().unwrap_or_default());
        token = s(&page, "/nextPageToken").to_owned();
        if token.is_empty() {
            break;
        }
    }
    if format == Format::Json {
        return output::json(&items);
    }
    if items.is_empty() {
        eprintln!("no image you can see has an open finding for {id} (or its aliases)");
        return Ok(());
    }
    // Repos as clients pull them: `<organization>/<name>` (names repeat
    // across organizations), the organization's name looked up once each.
    let mut orgs: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
    for i in &items {
        let org = s(i, "/repoId").split('/').next().unwrap_or("").to_owned();
        if org.is_empty() || orgs.contains_key(&org) {
            continue;
        }
        let name = client
            .call::<(), Value>(Method::GET, &format!("/iam/v2/groups/{org}"), &[], None)
            .await
            .ok()
            .map(|g| s(&g, "/name").to_owned())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| org.clone());
        orgs.insert(org, name);
    }
    let rows = items
        .iter()
        .map(|i| {
            let org = s(i, "/repoId").split('/').next().unwrap_or("");
            let repo = match orgs.get(org) {
                Some(o) => format!("{o}/{}", s(i, "/repoName")),
                None => s(i, "/repoName").to_owned(),
            };
            let list = |k: &str| {
                i.get(k)
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", "))
                    .unwrap_or_default()
            };
            vec![
                repo,
                list("tags"),
                s(i, "/digest").to_owned(),
                s(i, "/vulnerabilityId").to_owned(),
                list("purls"),
            ]
        })
        .collect();
    output::table(&["REPO", "TAGS", "DIGEST", "VULNERABILITY", "PACKAGES"], rows);
    Ok(())
}

/// `ward registry sbom <image>`.
pub async fn sbom(client: &Client, format: Format, image: &str) -> anyhow::Result<()> {
    let (repo, digest) = resolve_image(client, image).await?;
    let r = get_waiting(client, &format!("/registry/v1/repos/{repo}/digests/{digest}/sbom"), &[]).await?;
    if format == Format::Json {
        let mut r = r;
        if let Some(o) = r.as_object_mut() {
            o.remove("rawSbom");
        }
        return output::json(&r);
    }
    let rows = r
        .pointer("/graph/nodes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|n| n.get("package"))
        .map(|p| {
            vec![
                s(p, "/name").to_owned(),
                s(p, "/version").to_owned(),
                s(p, "/license").to_owned(),
                s(p, "/purl").to_owned(),
                s(p, "/description").to_owned(),
            ]
        })
        .collect();
    output::table(&["NAME", "VERSION", "LICENSE", "PURL", "FOUND IN"], rows);
    eprintln!("{} ({}); {}", s(&r, "/format"), s(&r, "/tool"), s(&r, "/description"));
    Ok(())
}

/// `ward advisories vex --image <image>`: the image's OpenVEX document.
pub async fn vex(client: &Client, image: &str) -> anyhow::Result<()> {
    let (repo, digest) = resolve_image(client, image).await?;
    let q = [("repo_id", repo), ("digest", digest)];
    let r = get_waiting(client, "/registry/v1/vuln_reports/raw", &q).await?;
    let doc = s(&r, "/rawReport");
    anyhow::ensure!(
        !doc.is_empty(),
        "{image} has no VEX statement (nothing in it is matched or decided), and an OpenVEX document needs one"
    );
    println!("{doc}");
    Ok(())
}

/// `ward advisories vex --group <group>`: every image of a group.
pub async fn group_vex(client: &Client, group: &str) -> anyhow::Result<()> {
    let uid = resource::resolve_flag::<ward_proto::iam::v2::Group>(client, "--group", group).await?;
    let r = client
        .call::<(), Value>(Method::GET, "/registry/v1/vuln_reports/vex", &[("group", uid)], None)
        .await?;
    let doc = s(&r, "/document");
    anyhow::ensure!(
        !doc.is_empty(),
        "no image in {group} has a VEX statement (nothing is matched or decided), and an OpenVEX document needs one"
    );
    println!("{doc}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::split_image;

    #[test]
    fn image_references() {
        let p = |s: &str| split_image(s).unwrap();
        let acme = || Some("acme".to_owned());
        assert_eq!(p("app:1.0"), (None, "app".into(), "1.0".into()));
        assert_eq!(p("acme/app"), (acme(), "app".into(), "latest".into()));
        assert_eq!(p("localhost:5000/acme/app:v2"), (acme(), "app".into(), "v2".into()));
        assert_eq!(p("app:v1@sha256:ab"), (None, "app".into(), "sha256:ab".into()));
        assert_eq!(
            p("localhost:5000/acme/app:v1@sha256:ab"),
            (acme(), "app".into(), "sha256:ab".into())
        );
        assert_eq!(
            p("reg.example/acme/team/app@sha256:ab"),
            (acme(), "team/app".into(), "sha256:ab".into())
        );
        assert!(split_image("").is_err());
    }
}
