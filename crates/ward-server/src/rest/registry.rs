//! `/registry/{v2beta1,v2}/…` over REST: repos (with their readme and the
//! images RPCs, which live under a repo's path), and tags.

use std::sync::Arc;

use super::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use ward_core::{Error, Result};
use ward_proto::Timestamp;
use ward_proto::registry::v2::{
    CreateRepoRequest, CreateTagRequest, DeleteRepoRequest, DeleteTagRequest, GetArchitecturesRequest,
    GetRepoReadmeRequest, GetRepoRequest, GetSizeRequest, GetTagRequest, ListReposRequest, ListTagsRequest, Repo,
    RepoReadme, Tag,
};

use super::table::{Endpoint, Routes};
use super::{Auth, JsonBody, Params, Reply, versioned};
use crate::status::ApiError;
use crate::ward::Ward;

pub fn routes() -> Routes {
    let mut r = Routes::new();
    for v in ["v2beta1", "v2"] {
        r = r
            .route(&format!("/registry/{v}/repos"), get(list_repos))
            .route(
                &format!("/registry/{v}/repos/{{*path}}"),
                post(create_repo)
                    .get(get_under_repo)
                    .patch(patch_under_repo)
                    .delete(delete_repo),
            )
            .route(&format!("/registry/{v}/tags"), get(list_tags))
            .route(
                &format!("/registry/{v}/tags/{{*path}}"),
                post(create_tag).get(get_tag).delete(delete_tag),
            );
    }
    r
}

/// What [`routes`] serves: the repo catch-all also carries the readme and
/// the images RPCs (see [`get_under_repo`], [`patch_under_repo`]).
pub fn endpoints() -> Vec<Endpoint> {
    let mut e = versioned! {"registry", "ReposService", [
        (GET, "/repos", "", "ListRepos"),
        (POST, "/repos/{parent=**}", "repo", "CreateRepo"),
        (GET, "/repos/{uid=**}", "", "GetRepo"),
        (PATCH, "/repos/{repo.uid=**}", "repo", "UpdateRepo"),
        (DELETE, "/repos/{uid=**}", "", "DeleteRepo"),
        (GET, "/repos/{uid=**}/readme", "", "GetRepoReadme"),
        (PATCH, "/repos/{repo_readme.uid=**}/readme", "repo_readme", "UpdateRepoReadme"),
    ]};
    e.extend(versioned! {"registry", "ImagesService", [
        (GET, "/repos/{repo_uid=**}/digests/{digest}/architectures", "", "GetArchitectures"),
        (GET, "/repos/{repo_uid=**}/digests/{digest}/size", "", "GetSize"),
    ]});
    e.extend(versioned! {"registry", "TagsService", [
        (GET, "/tags", "", "ListTags"),
        (POST, "/tags/{parent=**}", "tag", "CreateTag"),
        (GET, "/tags/{uid=**}", "", "GetTag"),
        (DELETE, "/tags/{uid=**}", "", "DeleteTag"),
    ]});
    e
}

fn json<T: serde::Serialize>(r: Result<T>) -> std::result::Result<Response, ApiError> {
    Ok(Json(r?).into_response())
}

async fn list_repos(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    mut q: Params,
) -> Reply<ward_proto::registry::v2::ListReposResponse> {
    let name = q.string("name");
    let req = ListReposRequest {
        uidp: q.uidp()?,
        name: (!name.is_empty()).then_some(name),
        page_size: q.int("page_size")?,
        page_token: q.string("page_token"),
        order_by: q.string("order_by"),
        skip: q.int("skip")?,
    };
    q.finish()?;
    Ok(Json(w.list_repos(&c, req).await?))
}

async fn create_repo(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    Path(parent): Path<String>,
    q: Params,
    body: JsonBody,
) -> Reply<Repo> {
    q.finish()?;
    let repo = body.message()?;
    Ok(Json(
        w.create_repo(
            &c,
            CreateRepoRequest {
                parent,
                repo: Some(repo),
            },
        )
        .await?,
    ))
}

/// GET `{uid}`, `{uid}/readme`, `{uid}/digests/{digest}/architectures` and
/// `{uid}/digests/{digest}/size`.
async fn get_under_repo(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    Path(path): Path<String>,
    mut q: Params,
) -> std::result::Result<Response, ApiError> {
    if let Some(uid) = path.strip_suffix("/readme") {
        q.finish()?;
        return json(w.get_repo_readme(&c, GetRepoReadmeRequest { uid: uid.into() }).await);
    }
    if let Some((repo_uid, rest)) = path.split_once("/digests/") {
        if let Some(digest) = rest.strip_suffix("/architectures") {
            q.finish()?;
            let req = GetArchitecturesRequest {
                repo_uid: repo_uid.into(),
                digest: digest.into(),
            };
            return json(w.get_architectures(&c, req).await);
        }
        if let Some(digest) = rest.strip_suffix("/size") {
            let req = GetSizeRequest {
                repo_uid: repo_uid.into(),
                digest: digest.into(),
                architecture: q.string("architecture"),
            };
            q.finish()?;
            return json(w.get_size(&c, req).await);
        }
    }
    q.finish()?;
    json(w.get_repo(&c, GetRepoRequest { uid: path }).await)
}

/// PATCH `{uid}` (the repo) or `{uid}/readme`.
async fn patch_under_repo(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    Path(path): Path<String>,
    mut q: Params,
    body: JsonBody,
) -> std::result::Result<Response, ApiError> {
    let mask = super::update_mask(&mut q, &body);
    q.finish()?;
    if let Some(uid) = path.strip_suffix("/readme") {
        let mut readme: RepoReadme = body.message()?;
        readme.uid = uid.into();
        return json(w.update_repo_readme(&c, readme, mask).await);
    }
    let mut repo: Repo = body.message()?;
    repo.uid = path;
    json(w.update_repo(&c, repo, mask).await)
}

async fn delete_repo(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    Path(uid): Path<String>,
    q: Params,
) -> Reply<serde_json::Value> {
    q.finish()?;
    w.delete_repo(&c, DeleteRepoRequest { uid }).await?;
    Ok(Json(serde_json::json!({})))
}

async fn list_tags(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    mut q: Params,
) -> Reply<ward_proto::registry::v2::ListTagsResponse> {
    let updated_since = match q.given("updated_since") {
        None => None,
        Some(since) => Some(
            serde_json::from_value::<Timestamp>(serde_json::Value::String(since))
                .map_err(|_| Error::invalid("updated_since", "updated_since must be an RFC 3339 timestamp"))?,
        ),
    };
    let req = ListTagsRequest {
        uidp: q.uidp()?,
        name: q.string("name"),
        updated_since,
        include_referrers: q.bool("include_referrers")?,
        include_dates: q.bool("include_dates")?,
        include_epochs: q.bool("include_epochs")?,
        digest: q.string("digest"),
        page_size: q.int("page_size")?,
        page_token: q.string("page_token"),
        order_by: q.string("order_by"),
        skip: q.int("skip")?,
    };
    q.finish()?;
    Ok(Json(w.list_tags(&c, req).await?))
}

async fn create_tag(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    Path(parent): Path<String>,
    q: Params,
    body: JsonBody,
) -> Reply<Tag> {
    q.finish()?;
    let tag = body.message()?;
    Ok(Json(
        w.create_tag(&c, CreateTagRequest { parent, tag: Some(tag) }).await?,
    ))
}

async fn get_tag(State(w): State<Arc<Ward>>, Auth(c): Auth, Path(uid): Path<String>, q: Params) -> Reply<Tag> {
    q.finish()?;
    Ok(Json(w.get_tag(&c, GetTagRequest { uid }).await?))
}

async fn delete_tag(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    Path(uid): Path<String>,
    q: Params,
) -> Reply<serde_json::Value> {
    q.finish()?;
    w.delete_tag(&c, DeleteTagRequest { uid }).await?;
    Ok(Json(serde_json::json!({})))
}
