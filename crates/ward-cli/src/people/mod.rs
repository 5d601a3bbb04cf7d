//! How an organization's people get in: `ward iam identity-providers` (its own
//! OIDC provider), `ward iam external-group-mappings` (the provider's groups
//! mapped to roles) and `ward iam invites` (codes that add whoever accepts
//! them to a group, and accepting one).

mod external_group_mappings;
mod identity_providers;
mod invites;

use std::path::Path;

use anyhow::{Context as _, bail};
use ward_core::capability::BUILTIN_ROLES;

pub use external_group_mappings::{ExternalGroupMappingsCommand, run as run_external_group_mappings};
pub use identity_providers::{IdentityProvidersCommand, run as run_identity_providers};
pub use invites::{InvitesCommand, accept_invite, run as run_invites};

/// The `what` in `path` (`-`: stdin) without its trailing newline; never
/// empty. Secrets come from files or stdin, never from the command line.
fn read_secret(what: &str, path: &Path) -> anyhow::Result<String> {
    let stdin = path == Path::new("-");
    let raw = if stdin {
        std::io::read_to_string(std::io::stdin()).with_context(|| format!("reading the {what} from stdin"))?
    } else {
        std::fs::read_to_string(path).with_context(|| format!("reading the {what} file {}", path.display()))?
    };
    let secret = raw.trim_end_matches(['\r', '\n']);
    if secret.is_empty() {
        let from = if stdin {
            "stdin".to_owned()
        } else {
            path.display().to_string()
        };
        bail!("the {what} from {from} is empty");
    }
    Ok(secret.to_owned())
}

/// A role uid as people read it: a built-in role's name, else the uid.
fn role_label(uid: &str) -> String {
    BUILTIN_ROLES
        .iter()
        .find(|r| r.uid() == uid)
        .map_or_else(|| uid.to_owned(), |r| r.name.to_owned())
}

fn yes_no(b: bool) -> String {
    String::from(if b { "yes" } else { "no" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_lose_only_their_trailing_newline() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secret");
        std::fs::write(&file, " s3cret \r\n").unwrap();
        assert_eq!(read_secret("client secret", &file).unwrap(), " s3cret ");
        std::fs::write(&file, "\n").unwrap();
        let e = read_secret("client secret", &file).unwrap_err();
        assert!(e.to_string().contains("is empty"), "{e}");
    }

    #[test]
    fn builtin_roles_show_by_name() {
        let viewer = ward_core::capability::builtin_role("viewer").unwrap().uid();
        assert_eq!(role_label(&viewer), "viewer");
        assert_eq!(role_label("abc/def"), "abc/def");
    }
}
