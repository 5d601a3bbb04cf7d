//! Repo readmes: Markdown, stored sanitized. Raw HTML inside the Markdown is
//! passed through ammonia (tags and attributes outside its allow-list, event
//! handlers, scripts and styles removed), and links and images may only use
//! http, https, mailto or relative targets, so a console that renders the
//! readme renders nothing executable.

use pulldown_cmark::{Event, Parser, Tag};
use ward_core::rpc;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::registry::v2::{GetRepoReadmeRequest, RepoReadme};

use crate::authz::Caller;
use crate::services::UpdateMask;
use crate::ward::Ward;

/// Longest readme stored, in bytes.
pub const MAX_README_BYTES: usize = 256 * 1024;
/// Most tags (`<` characters) the raw HTML of one readme may hold. The HTML
/// parser's cost grows with the tags times the open elements around them, so
/// this bound (with [`MAX_README_BYTES`]) keeps one sanitize to milliseconds;
/// real readmes hold a few dozen.
pub const MAX_README_HTML_TAGS: usize = 4096;

fn safe_url(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    match lower.split_once(':') {
        // A colon before any '/', '?' or '#' starts a scheme.
        Some((scheme, _)) if !scheme.contains(['/', '?', '#']) => {
            matches!(scheme, "http" | "https" | "mailto")
        }
        _ => true,
    }
}

/// The Markdown with its raw HTML sanitized; INVALID_ARGUMENT for a link or
/// image with an unsafe scheme. Removing a tag can join the text around it
/// into new markup (`<<x>script>`), so the result is sanitized again until
/// nothing changes; content that keeps changing is refused.
pub fn sanitize(markdown: &str) -> Result<String> {
    let mut current = sanitize_once(markdown)?;
    for _ in 0..4 {
        let next = sanitize_once(&current)?;
        if next == current {
            return Ok(current);
        }
        current = next;
    }
    Err(Error::invalid(
        "content",
        "the readme's HTML does not settle under sanitizing; remove the raw HTML",
    ))
}

fn sanitize_once(markdown: &str) -> Result<String> {
    let events: Vec<_> = Parser::new(markdown).into_offset_iter().collect();
    let tags: usize = events
        .iter()
        .filter(|(e, _)| matches!(e, Event::Html(_) | Event::InlineHtml(_)))
        .map(|(_, r)| markdown[r.clone()].bytes().filter(|b| *b == b'<').count())
        .sum();
    if tags > MAX_README_HTML_TAGS {
        return Err(Error::invalid(
            "content",
            format!("the readme's raw HTML holds more than {MAX_README_HTML_TAGS} tags; use Markdown instead"),
        ));
    }
    let mut out = String::with_capacity(markdown.len());
    let mut copied = 0;
    for (event, range) in events {
        match event {
            Event::Html(_) | Event::InlineHtml(_) => {
                out.push_str(&markdown[copied..range.start]);
                out.push_str(&ammonia::clean(&markdown[range.clone()]));
                copied = range.end;
            }
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) if !safe_url(&dest_url) => {
                return Err(Error::invalid(
                    "content",
                    format!(
                        "unsafe link target \"{}\": links and images may use http, https, mailto or relative URLs",
                        ward_core::names::echo(&dest_url)
                    ),
                ));
            }
            _ => {}
        }
    }
    if copied < markdown.len() {
        out.push_str(&markdown[copied..]);
    }
    Ok(out)
}

impl Ward {
    /// A readme checked and sanitized: the size first (free), then the
    /// sanitizer on a blocking thread, one per core at a time. Callers
    /// authorize before calling this: sanitizing is the expensive part of a
    /// readme write.
    pub(crate) async fn sanitized_readme(&self, field: &str, content: String) -> Result<String> {
        if content.len() > MAX_README_BYTES {
            return Err(Error::invalid(
                field,
                format!("a readme holds at most {MAX_README_BYTES} bytes"),
            ));
        }
        if content.is_empty() {
            return Ok(content);
        }
        let field = field.to_owned();
        self.cpu(move || sanitize(&content)).await?.map_err(|e| match e {
            Error::InvalidArgument(v) => Error::InvalidArgument(
                v.into_iter()
                    .map(|f| ward_core::error::FieldViolation {
                        field: field.clone(),
                        ..f
                    })
                    .collect(),
            ),
            other => other,
        })
    }

    pub async fn get_repo_readme(&self, caller: &Caller, req: GetRepoReadmeRequest) -> Result<RepoReadme> {
        let uid = Uidp::parse("uid", &req.uid)?;
        self.authorized_repo(caller, &rpc::GET_REPO_README, &uid).await?;
        let content = self.store.repo_readme(&uid).await?.unwrap_or_default();
        Ok(RepoReadme {
            uid: uid.into(),
            content,
        })
    }

    pub async fn update_repo_readme(
        &self,
        caller: &Caller,
        readme: RepoReadme,
        mask: UpdateMask,
    ) -> Result<RepoReadme> {
        let uid = Uidp::parse("repo_readme.uid", &readme.uid)?;
        self.authorized_repo(caller, &rpc::UPDATE_REPO_README, &uid).await?;
        let fields = ward_core::fieldmask::Updatable {
            mutable: &["content"],
            output_only: &["uid"],
            immutable: &[],
        };
        let mask = mask.resolve(&fields, &[("content", !readme.content.is_empty())])?;
        if !mask.contains("content") {
            return self
                .get_repo_readme(caller, GetRepoReadmeRequest { uid: uid.into() })
                .await;
        }
        let content = self.sanitized_readme("content", readme.content).await?;
        self.store
            .set_repo_readme(&uid, &content, self.clock.now_millis())
            .await?;
        Ok(RepoReadme {
            uid: uid.into(),
            content,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::sanitize;

    #[test]
    fn raw_html_is_cleaned_and_markdown_kept() {
        let md = "# Title\n\nSome *text* and <b onclick=\"x()\">bold</b>.\n\n<script>alert(1)</script>\n\n[ok](https://example.com)\n";
        let s = sanitize(md).unwrap();
        assert!(s.starts_with("# Title\n\nSome *text* and <b>"), "{s}");
        assert!(
            !s.contains("onclick") && !s.contains("<script") && !s.contains("alert(1)"),
            "{s}"
        );
        assert!(s.contains("[ok](https://example.com)"));
        assert_eq!(sanitize("plain `code` text").unwrap(), "plain `code` text");
    }

    #[test]
    fn removed_tags_cannot_assemble_new_markup() {
        for md in [
            "<<x>img src=x onerror=alert(1)>",
            "Hi <<x>script>alert(1)<<x>/script>",
            "[click]<x>(javascript:alert(document.domain))",
            "<x>[r]: javascript:alert(1)\n\n[click][r]",
        ] {
            if let Ok(s) = sanitize(md) {
                let lower = s.to_ascii_lowercase();
                assert!(
                    !lower.contains("onerror") && !lower.contains("<script") && !lower.contains("javascript:"),
                    "{md:?} -> {s:?}"
                );
                assert_eq!(sanitize(&s).ok().as_deref(), Some(s.as_str()), "stable: {md:?}");
            }
        }
    }

    #[test]
    fn unsafe_links_are_refused() {
        assert!(sanitize("[x](javascript:alert(1))").is_err());
        assert!(sanitize("![x](JaVaScRiPt:alert(1))").is_err());
        assert!(sanitize("[x](data:text/html,hi)").is_err());
        assert!(sanitize("[x](/relative/path) [y](#anchor) [z](mailto:a@b.c)").is_ok());
    }
}
