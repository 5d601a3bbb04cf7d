//! The server's secret key: what Ward seals stored secrets with (identity
//! providers' client secrets), and what it signs and seals the values it hands
//! out and later takes back (invite codes, login state, login handoff codes).
//!
//! The key never lives in the database: it is a file in the data directory
//! (created on first start, mode 0600) or comes from the environment, so a
//! copy of the database alone reveals no client secret and forges no invite.
//! Each use derives a key of its own (HMAC-SHA256 of the purpose), so a value
//! sealed for one purpose never opens as another.

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;
use ward_core::{Error, Result};

const KEY_BYTES: usize = 32;
const NONCE_BYTES: usize = 24;

/// What a derived key is for.
#[derive(Clone, Copy, Debug)]
pub enum Purpose {
    /// Identity providers' client secrets, at rest.
    ClientSecret,
    /// Invite codes (a MAC, not encryption: the code's content is not secret).
    Invite,
    /// The `state` of a login in progress, through the browser and the IdP.
    LoginState,
    /// The one-time code that hands a finished login to the CLI.
    LoginHandoff,
    /// Token signing keys, at rest.
    SigningKey,
}

impl Purpose {
    fn label(self) -> &'static [u8] {
        match self {
            Purpose::ClientSecret => b"ward client secret v1",
            Purpose::Invite => b"ward invite code v1",
            Purpose::LoginState => b"ward login state v1",
            Purpose::LoginHandoff => b"ward login handoff v1",
            Purpose::SigningKey => b"ward signing key v1",
        }
    }
}

/// The server's secret key.
#[derive(Clone)]
pub struct ServerSecret {
    key: [u8; KEY_BYTES],
}

impl std::fmt::Debug for ServerSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerSecret(<redacted>)")
    }
}

impl ServerSecret {
    /// A random key (tests).
    pub fn random() -> Self {
        let mut key = [0u8; KEY_BYTES];
        rand::thread_rng().fill_bytes(&mut key);
        Self { key }
    }

    /// The key from its base64 text (32 bytes).
    pub fn from_base64(text: &str) -> Result<Self> {
        let bytes = STANDARD
            .decode(text.trim())
            .or_else(|_| URL_SAFE_NO_PAD.decode(text.trim()))
            .map_err(|_| Error::internal("the secret key is not base64"))?;
        let key: [u8; KEY_BYTES] = bytes
            .try_into()
            .map_err(|_| Error::internal("the secret key must be 32 bytes (base64)"))?;
        Ok(Self { key })
    }

    /// Reads the key file, creating it (mode 0600) with a random key if it
    /// does not exist yet.
    pub fn load_or_create(path: &Path) -> Result<Self> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::from_base64(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let secret = Self::random();
                let text = format!("{}\n", STANDARD.encode(secret.key));
                write_private(path, text.as_bytes())
                    .map_err(|e| Error::internal(format_args!("create {}: {e}", path.display())))?;
                // Another process may have created it first: use whatever won.
                Self::from_base64(
                    &std::fs::read_to_string(path)
                        .map_err(|e| Error::internal(format_args!("read {}: {e}", path.display())))?,
                )
            }
            Err(e) => Err(Error::internal(format_args!("read {}: {e}", path.display()))),
        }
    }

    fn derived(&self, purpose: Purpose) -> [u8; KEY_BYTES] {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(purpose.label());
        mac.finalize().into_bytes().into()
    }

    /// Encrypts and authenticates `plaintext`, bound to `context` (e.g. the
    /// uid of the row that stores it, so a sealed value moved to another row
    /// does not open there). Output: nonce ‖ ciphertext.
    pub fn seal(&self, purpose: Purpose, context: &[u8], plaintext: &[u8]) -> Vec<u8> {
        let cipher = XChaCha20Poly1305::new(&self.derived(purpose).into());
        let mut nonce = [0u8; NONCE_BYTES];
        rand::thread_rng().fill_bytes(&mut nonce);
        let sealed = cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad: context,
                },
            )
            .expect("XChaCha20-Poly1305 encrypts any length this server handles");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        out
    }

    /// The plaintext of [`ServerSecret::seal`]'s output, or `None` when it was
    /// not sealed by this key for this purpose and context.
    pub fn open(&self, purpose: Purpose, context: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
        if sealed.len() < NONCE_BYTES {
            return None;
        }
        let (nonce, body) = sealed.split_at(NONCE_BYTES);
        XChaCha20Poly1305::new(&self.derived(purpose).into())
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: body,
                    aad: context,
                },
            )
            .ok()
    }

    /// [`ServerSecret::seal`] as URL-safe text.
    pub fn seal_text(&self, purpose: Purpose, plaintext: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(self.seal(purpose, b"", plaintext))
    }

    /// Opens [`ServerSecret::seal_text`]'s output.
    pub fn open_text(&self, purpose: Purpose, text: &str) -> Option<Vec<u8>> {
        self.open(purpose, b"", &URL_SAFE_NO_PAD.decode(text).ok()?)
    }

    /// A MAC of `data`.
    pub fn sign(&self, purpose: Purpose, data: &[u8]) -> [u8; 32] {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.derived(purpose)).expect("HMAC takes any key length");
        mac.update(data);
        mac.finalize().into_bytes().into()
    }

    /// Whether `tag` is [`ServerSecret::sign`]'s MAC of `data` (constant time).
    pub fn verify(&self, purpose: Purpose, data: &[u8], tag: &[u8]) -> bool {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.derived(purpose)).expect("HMAC takes any key length");
        mac.update(data);
        mac.verify_slice(tag).is_ok()
    }
}

/// Creates `path` with owner-only permissions; fails if it exists.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    match options.open(path) {
        Ok(mut f) => {
            f.write_all(bytes)?;
            f.sync_all()
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_values_open_only_with_their_key_purpose_and_context() {
        let k = ServerSecret::random();
        let sealed = k.seal(Purpose::ClientSecret, b"row-1", b"hunter2");
        assert_eq!(
            k.open(Purpose::ClientSecret, b"row-1", &sealed).as_deref(),
            Some(&b"hunter2"[..])
        );
        assert!(
            k.open(Purpose::ClientSecret, b"row-2", &sealed).is_none(),
            "other context"
        );
        assert!(
            k.open(Purpose::LoginState, b"row-1", &sealed).is_none(),
            "other purpose"
        );
        assert!(
            ServerSecret::random()
                .open(Purpose::ClientSecret, b"row-1", &sealed)
                .is_none(),
            "other key"
        );
        let mut tampered = sealed.clone();
        let last = tampered.len() - 1;
        tampered[last] ^= 1;
        assert!(k.open(Purpose::ClientSecret, b"row-1", &tampered).is_none(), "tampered");
        assert!(
            k.open(Purpose::ClientSecret, b"row-1", &sealed[..10]).is_none(),
            "short"
        );
        assert_ne!(
            sealed,
            k.seal(Purpose::ClientSecret, b"row-1", b"hunter2"),
            "random nonce"
        );
    }

    #[test]
    fn macs_verify_only_their_data_and_purpose() {
        let k = ServerSecret::random();
        let tag = k.sign(Purpose::Invite, b"payload");
        assert!(k.verify(Purpose::Invite, b"payload", &tag));
        assert!(!k.verify(Purpose::Invite, b"payloaD", &tag));
        assert!(!k.verify(Purpose::LoginState, b"payload", &tag));
        assert!(!k.verify(Purpose::Invite, b"payload", &tag[..31]));
    }

    #[test]
    fn key_file_is_created_once_and_private() {
        let dir = std::env::temp_dir().join(format!("ward-secret-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("secret.key");
        let a = ServerSecret::load_or_create(&path).unwrap();
        let b = ServerSecret::load_or_create(&path).unwrap();
        assert_eq!(a.key, b.key);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        assert!(ServerSecret::from_base64("c2hvcnQ=").is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
