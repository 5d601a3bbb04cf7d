//! `chainguard.platform.registry.Registry` (v1) onto the v2 registry service
//! layer: repos, tags and image facts. v1 differs from v2 in names (`id`,
//! `last_updated`, `items`), in CatalogTier numbers, in keeping the readme
//! inside the repo, in listing every tag class unless excluded, and in a few
//! RPCs v2 does not have (UpdateTag, ListTagHistory, ListEolTags,
//! GetRepoTagsSummary), served here from v2 reads and the tag history.

use std::sync::Arc;

use ward_core::{Error, Result};
use ward_proto::Timestamp;
use ward_proto::common::UidpFilter;
use ward_proto::registry::{self as v1, v2};
use ward_store::registry::TagHistoryRecord;

use super::{V1_PAGE, collect_all};
use crate::authz::Caller;
use crate::services::UpdateMask;
use crate::services::registry::repos::REPO_FIELDS;
use crate::ward::Ward;

// ---- pure conversions ----

/// (v1, v2) CatalogTier numbers: v1 kept 1-3 for retired tiers.
const TIERS: [(v1::CatalogTier, v2::CatalogTier); 7] = [
    (v1::CatalogTier::Unknown, v2::CatalogTier::Unspecified),
    (v1::CatalogTier::Application, v2::CatalogTier::Application),
    (v1::CatalogTier::Base, v2::CatalogTier::Base),
    (v1::CatalogTier::Fips, v2::CatalogTier::Fips),
    (v1::CatalogTier::Ai, v2::CatalogTier::Ai),
    (v1::CatalogTier::Devtools, v2::CatalogTier::Devtools),
    (v1::CatalogTier::Commercial, v2::CatalogTier::Commercial),
];

/// A v1 tier number as v2's; INVALID_ARGUMENT for a number v1 does not define
/// (the retired 1-3 included), rather than a v2 tier it happens to equal.
pub fn catalog_tier_in(tier: i32) -> Result<i32> {
    TIERS
        .iter()
        .find(|(a, _)| *a as i32 == tier)
        .map(|(_, b)| *b as i32)
        .ok_or_else(|| Error::invalid("catalog_tier", format!("catalog_tier: {tier} is not a v1 CatalogTier")))
}

/// A v2 tier number as v1's (UNKNOWN for one v1 cannot express).
pub fn catalog_tier_out(tier: i32) -> i32 {
    TIERS
        .iter()
        .find(|(_, b)| *b as i32 == tier)
        .map_or(v1::CatalogTier::Unknown as i32, |(a, _)| *a as i32)
}

/// The v2 repo a v1 repo describes; its readme travels separately.
pub fn repo_in(r: v1::Repo) -> Result<v2::Repo> {
    Ok(v2::Repo {
        uid: r.id,
        name: r.name,
        description: r.description,
        catalog_tier: catalog_tier_in(r.catalog_tier)?,
        bundles: r.bundles,
        aliases: r.aliases,
        active_tags: r.active_tags,
        create_time: None,
        update_time: None,
    })
}

pub fn repo_out(r: v2::Repo, readme: String) -> v1::Repo {
    v1::Repo {
        id: r.uid,
        name: r.name,
        catalog_tier: catalog_tier_out(r.catalog_tier),
        bundles: r.bundles,
        readme,
        aliases: r.aliases,
        create_time: r.create_time,
        active_tags: r.active_tags,
        description: r.description,
    }
}

/// The v2 tag a v1 tag describes (the same fields under other names).
pub fn tag_in(t: v1::Tag) -> Result<v2::Tag> {
    Ok(v2::Tag {
        uid: t.id,
        name: t.name,
        digest: t.digest,
        update_time: None,
        deprecated: t.deprecated,
        bundles: t.bundles,
    })
}

pub fn tag_out(t: v2::Tag) -> v1::Tag {
    v1::Tag {
        id: t.uid,
        name: t.name,
        digest: t.digest,
        last_updated: t.update_time,
        deprecated: t.deprecated,
        bundles: t.bundles,
    }
}

/// One page of the v2 tag listing a v1 TagFilter asks for (v1 lists every
/// class of tag unless told to exclude it; v2 the reverse).
pub fn tags_request(f: &v1::TagFilter, uidp: UidpFilter, page_token: String) -> v2::ListTagsRequest {
    v2::ListTagsRequest {
        uidp: Some(uidp),
        name: f.name.clone(),
        updated_since: f.updated_since,
        include_referrers: !f.exclude_referrers,
        include_dates: !f.exclude_dates,
        include_epochs: !f.exclude_epochs,
        digest: f.digest.clone(),
        page_size: V1_PAGE,
        page_token,
        order_by: String::new(),
        skip: 0,
    }
}

/// The tag summary of a repo (§4.3): the count, the newest update, the tag
/// named "latest" (else the most recently updated, the greater name on a
/// tie), and the longest other name on that tag's digest, "latest" and
/// "latest-dev" excluded (the greater name on a tie). With no tags, only
/// `id` and a zero count.
pub fn summarize(repo_id: &str, mut tags: Vec<v2::Tag>) -> v1::RepoTagsSummary {
    // A tag made by name that no push has pointed yet names no image.
    tags.retain(|t| !t.digest.is_empty());
    let newest = |t: &&v2::Tag| (t.update_time.unwrap_or_default(), t.name.clone());
    let latest = tags
        .iter()
        .find(|t| t.name == "latest")
        .or_else(|| tags.iter().max_by_key(newest));
    let latest_version = latest
        .and_then(|l| {
            tags.iter()
                .filter(|t| t.digest == l.digest && t.name != l.name)
                .filter(|t| t.name != "latest" && t.name != "latest-dev")
                .max_by_key(|t| (t.name.len(), t.name.clone()))
        })
        .map(|t| t.name.clone())
        .unwrap_or_default();
    v1::RepoTagsSummary {
        id: repo_id.to_owned(),
        tag_count: tags.len() as i64,
        last_updated: tags.iter().filter_map(|t| t.update_time).max(),
        latest_tag: latest.cloned().map(tag_out),
        latest_version,
    }
}

/// A tag as an EolTag. Ward has no package end-of-life data, so every tag is
/// active, not eligible for a grace period, with empty package fields.
pub fn eol_tag_out(t: v2::Tag) -> v1::EolTag {
    v1::EolTag {
        id: t.uid,
        name: t.name,
        main_package_name: String::new(),
        grace_status: v1::EolGracePeriodStatus::GraceNotEligible as i32,
        grace_period_expiry_date: None,
        main_package_version: None,
        tag_status: v1::EolTagStatus::TagActive as i32,
    }
}

pub fn history_out(h: TagHistoryRecord) -> v1::TagHistory {
    v1::TagHistory {
        update_timestamp: Some(Timestamp::from_millis(h.update_time)),
        digest: h.digest,
    }
}

/// v1 page sizes are int64; v2's are int32 (and v2 caps them anyway).
pub fn page_size_in(n: i64) -> i32 {
    n.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}

// ---- operations ----

/// Full replacement of the readme (an empty one clears it).
async fn put_readme(w: &Ward, c: &Caller, uid: &str, readme: String) -> Result<String> {
    let r = w
        .update_repo_readme(
            c,
            v2::RepoReadme {
                uid: uid.to_owned(),
                content: readme,
            },
            UpdateMask::Paths(vec!["content".into()]),
        )
        .await?;
    Ok(r.content)
}

/// Full replacement of a repo's v2 fields and its readme.
async fn replace_repo(w: &Ward, c: &Caller, repo: v2::Repo, readme: String) -> Result<v1::Repo> {
    let mask = UpdateMask::Paths(REPO_FIELDS.mutable.iter().map(|f| (*f).to_owned()).collect());
    let updated = w.update_repo(c, repo, mask).await?;
    let readme = put_readme(w, c, &updated.uid, readme).await?;
    Ok(repo_out(updated, readme))
}

/// The uid of the repo named `name` directly in group `parent`, if the
/// caller can see it.
async fn repo_named(w: &Ward, c: &Caller, parent: &str, name: &str) -> Result<Option<String>> {
    let page = w
        .list_repos(
            c,
            v2::ListReposRequest {
                uidp: Some(UidpFilter {
                    children_of: parent.to_owned(),
                    ..Default::default()
                }),
                name: Some(name.to_owned()),
                page_size: 1,
                ..Default::default()
            },
        )
        .await?;
    Ok(page.repos.into_iter().next().map(|r| r.uid))
}

/// `CreateRepo`: the v2 create. On a name collision without
/// `prevent_existing`, v1 creates or updates: when the repo holding the name
/// is in the same group (and visible), it is fully replaced, which needs
/// `repo.update` on it; a repo of that name elsewhere in the organization
/// stays an ALREADY_EXISTS.
pub async fn create_repo(w: Arc<Ward>, c: Caller, req: v1::CreateRepoRequest) -> Result<v1::Repo> {
    let mut repo = req.repo.unwrap_or_default();
    let readme = std::mem::take(&mut repo.readme);
    let repo = repo_in(repo)?;
    // The readme is checked (sanitizing is the expensive part) only once the
    // caller may create here, and before anything is written, so the repo
    // and its readme succeed or fail together on bad input.
    let parent = ward_core::uidp::Uidp::parse("parent_id", &req.parent_id)?;
    w.authorize(&c, &ward_core::rpc::CREATE_REPO, &parent)?;
    let readme = w.sanitized_readme("readme", readme).await?;
    let created = w
        .create_repo(
            &c,
            v2::CreateRepoRequest {
                parent: req.parent_id.clone(),
                repo: Some(v2::Repo {
                    uid: String::new(),
                    ..repo.clone()
                }),
            },
        )
        .await;
    match created {
        Ok(r) if readme.is_empty() => Ok(repo_out(r, readme)),
        Ok(r) => {
            let readme = put_readme(&w, &c, &r.uid, readme).await?;
            Ok(repo_out(r, readme))
        }
        Err(e @ Error::AlreadyExists { .. }) if !req.prevent_existing => {
            match repo_named(&w, &c, &req.parent_id, &repo.name).await? {
                Some(uid) => replace_repo(&w, &c, v2::Repo { uid, ..repo }, readme).await,
                None => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// `UpdateRepo`: full replacement (every field v2 lets change, and the readme).
pub async fn update_repo(w: Arc<Ward>, c: Caller, mut repo: v1::Repo) -> Result<v1::Repo> {
    let readme = std::mem::take(&mut repo.readme);
    let uid = ward_core::uidp::Uidp::parse("id", &repo.id)?;
    w.authorized_repo(&c, &ward_core::rpc::UPDATE_REPO, &uid).await?;
    let readme = w.sanitized_readme("readme", readme).await?;
    super::v1_named(
        replace_repo(&w, &c, repo_in(repo)?, readme).await,
        &[("repo.uid", "id"), ("repo.", "")],
    )
}

/// `ListRepos`: every visible repo matching the filter, with its readme.
pub async fn list_repos(w: Arc<Ward>, c: Caller, f: v1::RepoFilter) -> Result<v1::RepoList> {
    let Some(uidp) = super::narrow_to_id(f.uidp, &f.id)?.map(Option::unwrap_or_default) else {
        return Ok(v1::RepoList::default());
    };
    let name = (!f.name.is_empty()).then_some(f.name);
    let (wr, cr) = (&*w, &c);
    let repos = collect_all("/registry/v2/repos", move |page_token| {
        wr.list_repos(
            cr,
            v2::ListReposRequest {
                uidp: Some(uidp.clone()),
                name: name.clone(),
                page_size: V1_PAGE,
                page_token,
                ..Default::default()
            },
        )
    })
    .await?;
    // Readmes are up to 256 KiB each: the listing's byte budget counts them.
    let mut bytes: usize = repos.iter().map(prost::Message::encoded_len).sum();
    let mut items = Vec::with_capacity(repos.len());
    for r in repos {
        match w
            .get_repo_readme(&c, v2::GetRepoReadmeRequest { uid: r.uid.clone() })
            .await
        {
            Ok(readme) => {
                bytes += readme.content.len();
                if bytes > super::MAX_V1_BYTES {
                    return Err(super::too_large("/registry/v2/repos"));
                }
                items.push(repo_out(r, readme.content));
            }
            // Deleted since it was listed.
            Err(Error::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(v1::RepoList { items })
}

/// `GetRepoCountBySource`: Ward does not sync repos from one another, so no
/// repo has a source; the count is 0 for any repo the caller can see.
pub async fn get_repo_count_by_source(
    w: Arc<Ward>,
    c: Caller,
    req: v1::GetRepoCountBySourceRequest,
) -> Result<v1::RepoCount> {
    super::v1_named(w.get_repo(&c, v2::GetRepoRequest { uid: req.id }).await, super::ID)?;
    Ok(v1::RepoCount { count: 0 })
}

pub async fn delete_repo(w: Arc<Ward>, c: Caller, req: v1::DeleteRepoRequest) -> Result<()> {
    super::v1_named(
        w.delete_repo(&c, v2::DeleteRepoRequest { uid: req.id }).await,
        super::ID,
    )
}

/// `CreateTag`: create, or re-point the existing tag of that name.
pub async fn create_tag(w: Arc<Ward>, c: Caller, req: v1::CreateTagRequest) -> Result<v1::Tag> {
    let tag = tag_in(req.tag.unwrap_or_default())?;
    let t = w
        .create_tag(
            &c,
            v2::CreateTagRequest {
                parent: req.repo_id,
                tag: Some(v2::Tag {
                    uid: String::new(),
                    ..tag
                }),
            },
        )
        .await;
    let t = super::v1_named(t, &[("parent", "repo_id"), ("tag.uid", "tag.id")])?;
    Ok(tag_out(t))
}

/// `UpdateTag`: re-points the tag (see `Ward::update_tag`: only the digest
/// changes).
pub async fn update_tag(w: Arc<Ward>, c: Caller, tag: v1::Tag) -> Result<v1::Tag> {
    let t = w.update_tag(&c, tag_in(tag)?).await;
    Ok(tag_out(super::v1_named(t, &[("tag.uid", "id"), ("tag.", "")])?))
}

pub async fn delete_tag(w: Arc<Ward>, c: Caller, req: v1::DeleteTagRequest) -> Result<()> {
    super::v1_named(w.delete_tag(&c, v2::DeleteTagRequest { uid: req.id }).await, super::ID)
}

/// Every tag matching a v1 filter.
async fn all_tags(w: &Ward, c: &Caller, f: &v1::TagFilter, uidp: UidpFilter) -> Result<Vec<v2::Tag>> {
    collect_all("/registry/v2/tags", move |page_token| {
        w.list_tags(c, tags_request(f, uidp.clone(), page_token))
    })
    .await
}

pub async fn list_tags(w: Arc<Ward>, c: Caller, f: v1::TagFilter) -> Result<v1::TagList> {
    let Some(uidp) = super::narrow_to_id(f.uidp.clone(), &f.id)?.map(Option::unwrap_or_default) else {
        return Ok(v1::TagList::default());
    };
    let tags = all_tags(&w, &c, &f, uidp).await?;
    Ok(v1::TagList {
        items: tags.into_iter().map(tag_out).collect(),
    })
}

/// `GetRepoTagsSummary`: NOT_FOUND unless the caller can see the repo; the
/// summary covers the repo's tags it may list (at most the v1 list bound).
pub async fn get_repo_tags_summary(
    w: Arc<Ward>,
    c: Caller,
    req: v1::GetRepoTagsSummaryRequest,
) -> Result<v1::RepoTagsSummary> {
    let repo = w
        .get_repo(
            &c,
            v2::GetRepoRequest {
                uid: req.repo_id.clone(),
            },
        )
        .await?;
    let f = v1::TagFilter {
        exclude_referrers: req.exclude_referrers,
        exclude_dates: req.exclude_dates,
        exclude_epochs: req.exclude_epochs,
        ..Default::default()
    };
    let children = UidpFilter {
        children_of: repo.uid.clone(),
        ..Default::default()
    };
    let tags = all_tags(&w, &c, &f, children).await?;
    Ok(summarize(&repo.uid, tags))
}

/// `ListEolTags`: one page of the matching tags as EolTags. Ward has no
/// package end-of-life data, so every tag is `TAG_ACTIVE` and
/// `GRACE_NOT_ELIGIBLE` with empty package fields. Referrer tags
/// (`sha256-*`: signatures, attestations) are not images and are left out;
/// page tokens are the v2 tag listing's, passed through.
pub async fn list_eol_tags(w: Arc<Ward>, c: Caller, f: v1::EolTagFilter) -> Result<v1::EolTagList> {
    let r = w
        .list_tags(
            &c,
            v2::ListTagsRequest {
                uidp: f.uidp,
                name: f.name,
                include_referrers: false,
                include_dates: !f.exclude_dates,
                include_epochs: !f.exclude_epochs,
                page_size: page_size_in(f.page_size),
                page_token: f.page_token,
                ..Default::default()
            },
        )
        .await?;
    Ok(v1::EolTagList {
        items: r.tags.into_iter().map(eol_tag_out).collect(),
        next_page_token: r.next_page_token,
    })
}

/// `ListTagHistory`: the digests the tag has pointed at, oldest first, at
/// most 1000.
pub async fn list_tag_history(w: Arc<Ward>, c: Caller, f: v1::TagHistoryFilter) -> Result<v1::TagHistoryList> {
    let rows = w.tag_history(&c, &f.parent_id, f.start, f.end).await?;
    Ok(v1::TagHistoryList {
        items: rows.into_iter().map(history_out).collect(),
    })
}

pub async fn get_archs(w: Arc<Ward>, c: Caller, req: v1::ArchRequest) -> Result<v1::Archs> {
    let a = w
        .get_architectures(
            &c,
            v2::GetArchitecturesRequest {
                repo_uid: req.repo_id,
                digest: req.digest,
            },
        )
        .await?;
    Ok(v1::Archs { archs: a.architectures })
}

pub async fn get_size(w: Arc<Ward>, c: Caller, req: v1::SizeRequest) -> Result<v1::Size> {
    let s = w
        .get_size(
            &c,
            v2::GetSizeRequest {
                repo_uid: req.repo_id,
                digest: req.digest,
                architecture: req.arch,
            },
        )
        .await?;
    Ok(v1::Size {
        size: s.size,
        arch: s.architecture,
    })
}

/// The vulnerability-report RPCs: the service layer speaks v1 shapes
/// already (`services::vulns::api`).
macro_rules! pass_through {
    ($($name:ident($req:ty) -> $resp:ty;)*) => {
        $(pub async fn $name(w: Arc<Ward>, c: Caller, req: $req) -> Result<$resp> {
            w.$name(&c, req).await
        })*
    };
}

pass_through! {
    get_vuln_report(v1::VulnReportRequest) -> ward_proto::tenant::VulnReport;
    get_sbom(v1::SbomRequest) -> ward_proto::tenant::Sbom2;
    get_raw_sbom(v1::RawSbomRequest) -> v1::RawSbom;
    get_image_config(v1::ImageConfigRequest) -> v1::ImageConfig;
    list_vuln_reports(v1::VulnReportFilter) -> v1::VulnReportList;
    get_raw_vuln_report(v1::GetRawVulnReportRequest) -> v1::RawVulnReport;
        list_affected_images(v1::AffectedImagesRequest) -> v1::AffectedImageList;
    export_vex(v1::ExportVexRequest) -> v1::VexExport;
}

/// GetVulnReport over REST: the report's JSON, encoded once per report.
pub async fn get_vuln_report_json(
    w: Arc<Ward>,
    c: Caller,
    req: v1::VulnReportRequest,
) -> Result<crate::rest::transcode::Reply<ward_proto::tenant::VulnReport>> {
    w.get_vuln_report_json(&c, req)
        .await
        .map(crate::rest::transcode::Reply::Encoded)
}

pub async fn list_vuln_count_reports(
    w: Arc<Ward>,
    c: Caller,
    f: v1::VulnCountReportFilter,
) -> Result<v1::VulnCountReportList> {
    w.list_vuln_counts(&c, f, false).await
}

pub async fn list_cumulative_vuln_count_reports(
    w: Arc<Ward>,
    c: Caller,
    f: v1::VulnCountReportFilter,
) -> Result<v1::VulnCountReportList> {
    w.list_vuln_counts(&c, f, true).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(name: &str, digest: &str, ms: i64) -> v2::Tag {
        v2::Tag {
            uid: format!("{:040x}/{:016x}/{name}", 1, 2),
            name: name.into(),
            digest: digest.into(),
            update_time: Some(Timestamp::from_millis(ms)),
            deprecated: false,
            bundles: Vec::new(),
        }
    }

    #[test]
    fn catalog_tiers_translate_both_ways() {
        for (v1n, v2n) in [(0, 0), (4, 1), (5, 2), (6, 3), (7, 4), (8, 5), (9, 6)] {
            assert_eq!(catalog_tier_in(v1n).unwrap(), v2n);
            assert_eq!(catalog_tier_out(v2n), v1n);
        }
        for retired in [1, 2, 3, 10, -1] {
            assert!(catalog_tier_in(retired).is_err(), "{retired}");
        }
        assert_eq!(catalog_tier_out(42), 0);
    }

    #[test]
    fn repos_round_trip() {
        let v1r = v1::Repo {
            id: "x".into(),
            name: "nginx".into(),
            catalog_tier: v1::CatalogTier::Fips as i32,
            bundles: vec!["fips".into()],
            readme: String::new(),
            aliases: vec!["nginx:latest".into()],
            create_time: Some(Timestamp::from_millis(5)),
            active_tags: vec!["1.25".into()],
            description: "web".into(),
        };
        let v2r = repo_in(v1r.clone()).unwrap();
        assert_eq!(v2r.uid, "x");
        assert_eq!(v2r.catalog_tier, v2::CatalogTier::Fips as i32);
        assert_eq!(v2r.create_time, None, "output only");
        let back = repo_out(
            v2::Repo {
                create_time: Some(Timestamp::from_millis(5)),
                ..v2r
            },
            "# hi".into(),
        );
        assert_eq!(
            back,
            v1::Repo {
                readme: "# hi".into(),
                ..v1r
            }
        );
    }

    #[test]
    fn tags_translate_with_their_labels() {
        let t = v2::Tag {
            deprecated: true,
            bundles: vec!["fips".into()],
            ..tag("1.0", "sha256:aa", 7)
        };
        let v1t = tag_out(t.clone());
        assert_eq!(v1t.id, t.uid);
        assert_eq!(v1t.last_updated, t.update_time);
        assert!(v1t.deprecated && v1t.bundles == ["fips"]);
        let back = tag_in(v1t).unwrap();
        assert_eq!(back, v2::Tag { update_time: None, ..t });
    }

    #[test]
    fn tag_filters_invert_the_exclusions() {
        let f = v1::TagFilter {
            exclude_dates: true,
            digest: "sha256:aa".into(),
            ..Default::default()
        };
        let r = tags_request(&f, UidpFilter::default(), "tok".into());
        assert!(r.include_referrers && !r.include_dates && r.include_epochs);
        assert_eq!(
            (r.digest.as_str(), r.page_token.as_str(), r.page_size),
            ("sha256:aa", "tok", V1_PAGE)
        );
    }

    #[test]
    fn summary_prefers_the_tag_named_latest() {
        let tags = vec![
            tag("latest", "sha256:a", 10),
            tag("latest-dev", "sha256:a", 30),
            tag("1", "sha256:a", 10),
            tag("1.25", "sha256:a", 10),
            tag("1.25.3", "sha256:a", 10),
            tag("1.25.3-r100", "sha256:b", 20),
        ];
        let s = summarize("repo", tags);
        assert_eq!(s.id, "repo");
        assert_eq!(s.tag_count, 6);
        assert_eq!(s.last_updated, Some(Timestamp::from_millis(30)));
        assert_eq!(s.latest_tag.unwrap().name, "latest");
        assert_eq!(s.latest_version, "1.25.3");
    }

    #[test]
    fn summary_without_latest_uses_the_newest_tag() {
        let tags = vec![
            tag("1.24", "sha256:a", 10),
            tag("1.25", "sha256:b", 20),
            tag("1.25.3", "sha256:b", 5),
            tag("latest-dev", "sha256:b", 5),
        ];
        let s = summarize("repo", tags);
        assert_eq!(s.latest_tag.unwrap().name, "1.25");
        assert_eq!(s.latest_version, "1.25.3");
        // Only "latest-dev" shares the digest, and it does not count.
        let s = summarize(
            "repo",
            vec![tag("edge", "sha256:c", 2), tag("latest-dev", "sha256:c", 1)],
        );
        assert_eq!(s.latest_tag.unwrap().name, "edge");
        assert_eq!(s.latest_version, "");
    }

    #[test]
    fn summary_of_no_tags_is_empty() {
        let s = summarize("repo", Vec::new());
        assert_eq!(
            s,
            v1::RepoTagsSummary {
                id: "repo".into(),
                ..Default::default()
            }
        );
    }

    #[test]
    fn eol_tags_are_active_without_package_data() {
        let e = eol_tag_out(tag("1.0", "sha256:a", 1));
        assert_eq!(e.name, "1.0");
        assert_eq!(e.tag_status, v1::EolTagStatus::TagActive as i32);
        assert_eq!(e.grace_status, v1::EolGracePeriodStatus::GraceNotEligible as i32);
        assert!(e.main_package_name.is_empty() && e.main_package_version.is_none());
    }

    #[test]
    fn history_and_page_sizes_convert() {
        let h = history_out(TagHistoryRecord {
            update_time: 9,
            digest: "sha256:a".into(),
        });
        assert_eq!(h.update_timestamp, Some(Timestamp::from_millis(9)));
        assert_eq!(h.digest, "sha256:a");
        assert_eq!(page_size_in(50), 50);
        assert_eq!(page_size_in(i64::MAX), i32::MAX);
        assert_eq!(page_size_in(-5), -5);
    }
}
