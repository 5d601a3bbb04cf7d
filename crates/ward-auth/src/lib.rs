//! Ward as its own token issuer.
//!
//! API tokens are EdDSA (Ed25519) JWTs with a `kid`, `iss` = the issuer URL,
//! `sub` = the identity UIDP, `aud` = the API URL, and a one-hour lifetime.
//! Signing keys live in the database so every replica signs and verifies with the
//! same set; the newest key signs, and every stored key verifies (rotation keeps
//! old public keys until their tokens have expired).
//!
//! Verification costs a signature check (tens of µs), so verified claims are
//! cached by the token itself (an exact key: hashing it for the map costs a
//! tenth of a SHA-256, and no collision can stand in for a token), with the
//! `kid` that signed it; expiry is
//! re-checked against the injected clock on every hit, so a cached token still
//! stops working on time, and so is its key: once a refresh finds a key gone
//! from the database, every token it signed stops working, cached or not.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::SigningKey;
use ed25519_dalek::pkcs8::EncodePrivateKey;
use jsonwebtoken::{Algorithm, DecodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use ward_core::clock::Clock;
use ward_core::{Error, Result};
use ward_store::{SigningKeyRecord, Store};

use crate::secret::{Purpose, ServerSecret};

pub mod secret;
pub mod upstream;

/// Lifetime of an API token.
pub const TOKEN_LIFETIME_SECS: i64 = 3600;
/// Tokens longer than this are rejected before any parsing.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// Memory the verified-token cache may hold (about 16,000 typical tokens).
const VERIFIED_CACHE_BYTES: u64 = 32 * 1024 * 1024;
const ALGORITHM: &str = "EdDSA";
/// At most one reload of the key set per interval when an unknown `kid` shows
/// up (a key another replica just added).
const KEY_RELOAD_INTERVAL_MS: i64 = 10_000;
/// How often a running server re-reads its keys, to start signing with a key
/// that `ward admin rotate-key` added.
pub const KEY_REFRESH_PERIOD: std::time::Duration = std::time::Duration::from_secs(60);
/// A replaced key is kept this long after its successor appeared: every token
/// it signed has expired by then, even on a server that had not yet refreshed.
const KEY_RETIRE_AFTER_MS: i64 = (TOKEN_LIFETIME_SECS + 5 * 60) * 1000;

/// Adds a new signing key (it signs from the next refresh on) and deletes keys
/// whose tokens can no longer be valid. Returns the new key's id.
pub async fn rotate_key(store: &dyn Store, secret: &ServerSecret, now_ms: i64) -> Result<String> {
    let key = generate_key(now_ms)?;
    store.insert_signing_key(&seal_key(&key, secret)).await?;
    prune_keys(store, now_ms).await?;
    Ok(key.kid)
}

/// Deletes every key whose successor is older than [`KEY_RETIRE_AFTER_MS`].
pub async fn prune_keys(store: &dyn Store, now_ms: i64) -> Result<()> {
    let keys = store.signing_keys().await?;
    for pair in keys.windows(2) {
        if now_ms - pair[1].create_time > KEY_RETIRE_AFTER_MS {
            tracing::info!(kid = pair[0].kid, "retiring a replaced signing key");
            store.delete_signing_key(&pair[0].kid).await?;
        }
    }
    Ok(())
}

/// One audience or several (RFC 7519 allows both forms).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Audience {
    pub fn contains(&self, aud: &str) -> bool {
        match self {
            Audience::One(a) => a == aud,
            Audience::Many(v) => v.iter().any(|a| a == aud),
        }
    }

    pub fn to_vec(&self) -> Vec<String> {
        match self {
            Audience::One(a) => vec![a.clone()],
            Audience::Many(v) => v.clone(),
        }
    }

    fn of(mut v: Vec<String>) -> Self {
        if v.len() == 1 {
            Audience::One(v.remove(0))
        } else {
            Audience::Many(v)
        }
    }
}

/// The upstream token a Ward token was exchanged for (`act`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    pub iss: String,
    pub sub: String,
    pub aud: Audience,
}

/// The claims of a Ward API token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub iss: String,
    pub sub: String,
    pub aud: Audience,
    pub iat: i64,
    pub exp: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub act: Option<Actor>,
    /// Narrowing: the token acts only in these groups (and below).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    /// Narrowing: the token carries only these capabilities (dotted names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap: Option<Vec<String>>,
    /// A registry token (from the registry's token endpoint): valid only at
    /// the OCI endpoint, for these repositories and actions (Docker's token
    /// claim shape).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<Vec<RegistryAccess>>,
    /// Roles this session holds besides the identity's bindings: mapped from
    /// the person's groups at their identity provider when they logged in,
    /// and never stored as bindings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles: Option<Vec<SessionRole>>,
}

/// A role a login session holds at a group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRole {
    pub scope: String,
    pub role: String,
}

/// One repository a registry token may act on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryAccess {
    #[serde(rename = "type")]
    pub kind: String,
    /// `<organization uid>/<repo name>`.
    pub name: String,
    /// `pull`, `push`, `delete`.
    pub actions: Vec<String>,
}

/// What to put in a token besides the issuer and times.
#[derive(Clone, Debug, Default)]
pub struct Grant {
    pub subject: String,
    /// Empty means the API URL.
    pub audiences: Vec<String>,
    /// Shorter than [`TOKEN_LIFETIME_SECS`] when set.
    pub expires_at: Option<i64>,
    pub act: Option<Actor>,
    pub scopes: Option<Vec<String>>,
    pub cap: Option<Vec<String>>,
    pub access: Option<Vec<RegistryAccess>>,
    pub roles: Option<Vec<SessionRole>>,
}

struct Key {
    kid: String,
    /// None when this server's secret key does not open the private half
    /// (another replica's key under another secret key): it still verifies.
    /// Kept expanded: signing through `jsonwebtoken` would parse the DER and
    /// derive the public key again on every token (a second scalar
    /// multiplication, as costly as the signature).
    encoding: Option<SigningKey>,
    decoding: DecodingKey,
    /// Raw 32-byte Ed25519 public key.
    public: Vec<u8>,
}

struct KeySet {
    keys: Vec<Key>,
    loaded_at_ms: i64,
}

/// Issues and verifies Ward API tokens.
pub struct Tokens {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    issuer: String,
    audience: String,
    /// The registry's audience when it differs from the API's (`--registry-url`).
    registry_audience: Option<String>,
    keys: RwLock<KeySet>,
    /// A verified token → the kid that signed it, and its claims; at most
    /// [`VERIFIED_CACHE_BYTES`] of tokens.
    verified: moka::sync::Cache<Arc<str>, Verified>,
    /// Opens the private keys, stored sealed.
    secret: ServerSecret,
}

/// A verified token, as cached.
#[derive(Clone)]
struct Verified {
    kid: Arc<str>,
    claims: Arc<Claims>,
}

fn unauthenticated(msg: &str) -> Error {
    Error::Unauthenticated(msg.to_owned())
}

const NO_OPENABLE_KEY: &str = "no token signing key opens with this server's secret key: \
                               replicas sharing a database need the same --secret-key";

/// A JWS compact serialization of `claims` signed with EdDSA, byte for
/// byte what `jsonwebtoken::encode` writes (Ed25519 is deterministic):
/// base64url(header JSON).base64url(claims JSON).base64url(signature).
fn sign_jws<T: Serialize>(kid: &str, key: &SigningKey, claims: &T) -> Result<String> {
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(kid.to_owned());
    let part = |v: &[u8]| URL_SAFE_NO_PAD.encode(v);
    let json = |e: serde_json::Error| Error::internal(format_args!("sign: {e}"));
    let message = format!(
        "{}.{}",
        part(&serde_json::to_vec(&header).map_err(json)?),
        part(&serde_json::to_vec(claims).map_err(json)?)
    );
    let signature = ed25519_dalek::Signer::sign(key, message.as_bytes());
    Ok(format!("{message}.{}", part(&signature.to_bytes())))
}

/// Marks a private key stored sealed with the server's secret key. Keys
/// stored before sealing (plain PKCS#8 DER, which starts with 0x30) still load;
/// they are retired by the next rotation.
const SEALED_KEY_PREFIX: &[u8] = b"ward-sealed-v1:";

/// The record with its private key sealed (bound to its kid).
fn seal_key(r: &SigningKeyRecord, secret: &ServerSecret) -> SigningKeyRecord {
    let mut sealed = SEALED_KEY_PREFIX.to_vec();
    sealed.extend(secret.seal(Purpose::SigningKey, r.kid.as_bytes(), &r.private_key));
    SigningKeyRecord {
        private_key: sealed,
        ..r.clone()
    }
}

/// A stored signing key's private half as PKCS#8 DER, opened with the
/// server's secret key (or as stored, for a key from before sealing).
pub fn private_key_der(r: &SigningKeyRecord, secret: &ServerSecret) -> Result<Vec<u8>> {
    Ok(match r.private_key.strip_prefix(SEALED_KEY_PREFIX) {
        Some(sealed) => secret
            .open(Purpose::SigningKey, r.kid.as_bytes(), sealed)
            .ok_or_else(|| {
                Error::internal(format_args!(
                    "signing key {} does not open with this server's secret key \
                 (replicas sharing a database need the same --secret-key)",
                    r.kid
                ))
            })?,
        None => r.private_key.clone(),
    })
}

fn key_from_record(r: &SigningKeyRecord, secret: &ServerSecret) -> Result<Key> {
    if r.algorithm != ALGORITHM {
        return Err(Error::internal(format_args!(
            "signing key {} has unsupported algorithm {}",
            r.kid, r.algorithm
        )));
    }
    let encoding = match private_key_der(r, secret) {
        Ok(der) => Some(
            <SigningKey as ed25519_dalek::pkcs8::DecodePrivateKey>::from_pkcs8_der(&der)
                .map_err(|e| Error::internal(format_args!("signing key {}: {e}", r.kid)))?,
        ),
        Err(e) => {
            tracing::warn!(kid = %r.kid, "{}", e.message());
            None
        }
    };
    let decoding = DecodingKey::from_ed_components(&URL_SAFE_NO_PAD.encode(&r.public_key))
        .map_err(|e| Error::internal(format_args!("signing key {}: {e}", r.kid)))?;
    Ok(Key {
        kid: r.kid.clone(),
        encoding,
        decoding,
        public: r.public_key.clone(),
    })
}

/// A new random Ed25519 signing key record.
pub fn generate_key(now_ms: i64) -> Result<SigningKeyRecord> {
    let signing = SigningKey::generate(&mut rand::rngs::OsRng);
    let public = signing.verifying_key().to_bytes().to_vec();
    let der = signing
        .to_pkcs8_der()
        .map_err(|e| Error::internal(format_args!("encode key: {e}")))?;
    let kid = hex::encode(&Sha256::digest(&public)[..8]);
    Ok(SigningKeyRecord {
        kid,
        algorithm: ALGORITHM.into(),
        private_key: der.as_bytes().to_vec(),
        public_key: public,
        create_time: now_ms,
    })
}

/// The token in an `Authorization` value: `Bearer <token>`, or the bare token
/// (some gRPC clients send it as given).
pub fn bearer(header: &str) -> Option<&str> {
    let h = header.trim_start();
    let token = match h.split_once(' ') {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => rest.trim(),
        Some(_) => return None,
        None if h.trim_end().eq_ignore_ascii_case("bearer") => return None,
        None => h.trim_end(),
    };
    (!token.is_empty()).then_some(token)
}

impl Tokens {
    /// Loads the signing keys, creating the first one on an empty database.
    pub async fn load(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        issuer: String,
        audience: String,
        secret: ServerSecret,
    ) -> Result<Self> {
        let mut records = store.signing_keys().await?;
        if records.is_empty() {
            store
                .insert_signing_key(&seal_key(&generate_key(clock.now_millis())?, &secret))
                .await?;
            tracing::info!("created the first token signing key");
            records = store.signing_keys().await?;
        }
        let keys = records
            .iter()
            .map(|r| key_from_record(r, &secret))
            .collect::<Result<Vec<_>>>()?;
        if !keys.iter().any(|k| k.encoding.is_some()) {
            return Err(Error::internal(NO_OPENABLE_KEY));
        }
        let verified = moka::sync::Cache::builder()
            // A token's bytes, and about as much again for its claims.
            .weigher(|token: &Arc<str>, _: &Verified| u32::try_from(token.len() * 2).unwrap_or(u32::MAX))
            .max_capacity(VERIFIED_CACHE_BYTES)
            .time_to_live(Duration::from_secs(TOKEN_LIFETIME_SECS as u64))
            .build();
        Ok(Self {
            keys: RwLock::new(KeySet {
                keys,
                loaded_at_ms: clock.now_millis(),
            }),
            store,
            clock,
            issuer,
            audience,
            registry_audience: None,
            verified,
            secret,
        })
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    pub fn audience(&self) -> &str {
        &self.audience
    }

    /// The registry's audience (the API's unless set apart).
    pub fn registry_audience(&self) -> &str {
        self.registry_audience.as_deref().unwrap_or(&self.audience)
    }

    /// Gives the registry an audience of its own: tokens for it verify here
    /// too, and callers check which of the two a token names.
    pub fn set_registry_audience(&mut self, audience: String) {
        self.registry_audience = (audience != self.audience).then_some(audience);
    }

    /// A fresh API token for `subject`, signed with the newest key.
    pub fn mint(&self, subject: &str) -> Result<String> {
        self.mint_grant(&Grant {
            subject: subject.to_owned(),
            ..Grant::default()
        })
        .map(|(t, _)| t)
    }

    /// A token for `grant`, and its expiry (seconds since the epoch).
    pub fn mint_grant(&self, grant: &Grant) -> Result<(String, i64)> {
        let now = self.clock.now_secs();
        let audiences = if grant.audiences.is_empty() {
            vec![self.audience.clone()]
        } else {
            grant.audiences.clone()
        };
        let exp = grant
            .expires_at
            .map_or(now + TOKEN_LIFETIME_SECS, |e| e.min(now + TOKEN_LIFETIME_SECS));
        let claims = Claims {
            iss: self.issuer.clone(),
            sub: grant.subject.clone(),
            aud: Audience::of(audiences),
            iat: now,
            exp,
            act: grant.act.clone(),
            scopes: grant.scopes.clone(),
            cap: grant.cap.clone(),
            access: grant.access.clone(),
            roles: grant.roles.clone(),
        };
        Ok((self.sign(&claims)?, exp))
    }

    /// Signs `claims` as they are with the newest key: for tokens Ward hands
    /// to others (a webhook delivery's, audience `customer`), which its own
    /// verification never accepts since they name another audience.
    pub fn sign<T: Serialize>(&self, claims: &T) -> Result<String> {
        let keys = self.keys.read().expect("key lock");
        let key = keys
            .keys
            .iter()
            .rev()
            .find(|k| k.encoding.is_some())
            .ok_or_else(|| Error::internal(NO_OPENABLE_KEY))?;
        let signing = key.encoding.as_ref().ok_or_else(|| Error::internal(NO_OPENABLE_KEY))?;
        sign_jws(&key.kid, signing, claims)
    }

    /// Verifies a token: signature by one of Ward's keys, issuer, audience and
    /// expiry. Any failure is UNAUTHENTICATED.
    pub async fn verify(&self, token: &str) -> Result<Arc<Claims>> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(unauthenticated("the token is too large"));
        }
        let claims = match self.verified.get(token) {
            // Its key must still be loaded: a removed key's tokens stop here.
            Some(v) if self.has_kid(&v.kid) => v.claims,
            Some(_) => {
                self.verified.invalidate(token);
                return Err(unauthenticated("the token is not signed by this issuer"));
            }
            None => {
                let (kid, claims) = self.check_signature(token).await?;
                let claims = Arc::new(claims);
                self.verified.insert(
                    token.into(),
                    Verified {
                        kid: kid.into(),
                        claims: claims.clone(),
                    },
                );
                claims
            }
        };
        if self.clock.now_secs() >= claims.exp {
            return Err(unauthenticated("the token has expired"));
        }
        Ok(claims)
    }

    /// The claims of a token signed by one of the loaded keys, and that key's id.
    async fn check_signature(&self, token: &str) -> Result<(String, Claims)> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| unauthenticated("the token is malformed"))?;
        if header.alg != Algorithm::EdDSA {
            return Err(unauthenticated("the token is not signed by this issuer"));
        }
        let kid = header
            .kid
            .ok_or_else(|| unauthenticated("the token is not signed by this issuer"))?;
        if !self.has_kid(&kid) {
            self.reload_keys().await?;
        }
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.set_issuer(&[&self.issuer]);
        match &self.registry_audience {
            Some(r) => validation.set_audience(&[&self.audience, r]),
            None => validation.set_audience(&[&self.audience]),
        }
        validation.set_required_spec_claims(&["iss", "sub", "aud", "exp"]);
        // Expiry is checked against the injected clock by the caller.
        validation.validate_exp = false;
        let keys = self.keys.read().expect("key lock");
        let key = keys
            .keys
            .iter()
            .find(|k| k.kid == kid)
            .ok_or_else(|| unauthenticated("the token is not signed by this issuer"))?;
        jsonwebtoken::decode::<Claims>(token, &key.decoding, &validation)
            .map(|d| (kid, d.claims))
            .map_err(|e| {
                use jsonwebtoken::errors::ErrorKind;
                unauthenticated(match e.kind() {
                    ErrorKind::InvalidAudience => "the token's audience is not this API",
                    ErrorKind::InvalidIssuer => "the token's issuer is not this server",
                    ErrorKind::InvalidSignature => "the token's signature is invalid",
                    ErrorKind::MissingRequiredClaim(_) => "the token lacks a required claim",
                    _ => "the token is malformed",
                })
            })
    }

    fn has_kid(&self, kid: &str) -> bool {
        self.keys.read().expect("key lock").keys.iter().any(|k| k.kid == kid)
    }

    /// Re-reads the key set now (the newest key signs from then on). Keys no
    /// longer in the database stop verifying, even tokens already cached.
    pub async fn refresh(&self) -> Result<()> {
        let records = self.store.signing_keys().await?;
        let keys = records
            .iter()
            .map(|r| key_from_record(r, &self.secret))
            .collect::<Result<Vec<_>>>()?;
        if !keys.is_empty() {
            *self.keys.write().expect("key lock") = KeySet {
                keys,
                loaded_at_ms: self.clock.now_millis(),
            };
        }
        Ok(())
    }

    /// Re-reads the key set from the database, at most once per interval (as
    /// [`Tokens::refresh`], keys gone from the database stop verifying).
    async fn reload_keys(&self) -> Result<()> {
        let now = self.clock.now_millis();
        if now - self.keys.read().expect("key lock").loaded_at_ms < KEY_RELOAD_INTERVAL_MS {
            return Ok(());
        }
        let records = self.store.signing_keys().await?;
        let keys = records
            .iter()
            .map(|r| key_from_record(r, &self.secret))
            .collect::<Result<Vec<_>>>()?;
        *self.keys.write().expect("key lock") = KeySet {
            keys,
            loaded_at_ms: now,
        };
        Ok(())
    }

    /// The public keys, as a JWK Set.
    pub fn jwks(&self) -> serde_json::Value {
        let keys = self.keys.read().expect("key lock");
        let jwks: Vec<_> = keys
            .keys
            .iter()
            .map(|k| {
                serde_json::json!({
                    "kty": "OKP", "crv": "Ed25519", "alg": ALGORITHM, "use": "sig",
                    "kid": k.kid, "x": URL_SAFE_NO_PAD.encode(&k.public),
                })
            })
            .collect();
        serde_json::json!({ "keys": jwks })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ward's own JWS is what `jsonwebtoken` would have written, and it
    /// verifies with `jsonwebtoken` against the public key.
    #[test]
    fn tokens_are_byte_for_byte_jsonwebtokens() {
        let key = SigningKey::from_bytes(&[7u8; 32]);
        let der = key.to_pkcs8_der().unwrap();
        let claims = serde_json::json!({"iss": "i", "sub": "s", "aud": "a", "exp": 4_000_000_000_i64, "x": [1, "ü"]});
        let ours = sign_jws("k1", &key, &claims).unwrap();
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some("k1".into());
        let theirs = jsonwebtoken::encode(
            &header,
            &claims,
            &jsonwebtoken::EncodingKey::from_ed_der(der.as_bytes()),
        )
        .unwrap();
        assert_eq!(ours, theirs);
        let public = URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes());
        let mut v = Validation::new(Algorithm::EdDSA);
        v.set_audience(&["a"]);
        let decoded =
            jsonwebtoken::decode::<serde_json::Value>(&ours, &DecodingKey::from_ed_components(&public).unwrap(), &v)
                .unwrap();
        assert_eq!(decoded.claims, claims);
    }

    #[test]
    fn bearer_forms() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("abc"), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer "), None);
        assert_eq!(bearer(""), None);
    }

    const ISS: &str = "https://ward.example";
    const AUD: &str = "https://api.ward.example";

    /// One secret key for every test: replicas sharing a database share it.
    fn secret() -> &'static ServerSecret {
        static SECRET: std::sync::OnceLock<ServerSecret> = std::sync::OnceLock::new();
        SECRET.get_or_init(ServerSecret::random)
    }

    async fn tokens(store: &Arc<dyn Store>, clock: &ward_core::clock::OffsetClock) -> Tokens {
        Tokens::load(
            store.clone(),
            Arc::new(clock.clone()),
            ISS.into(),
            AUD.into(),
            secret().clone(),
        )
        .await
        .unwrap()
    }

    fn kid_of(token: &str) -> String {
        jsonwebtoken::decode_header(token).unwrap().kid.unwrap()
    }

    #[tokio::test]
    async fn a_deleted_key_stops_its_cached_tokens_after_refresh() {
        let db = ward_store::testing::sqlite();
        let store = ward_store::open(&db.url).await.unwrap();
        let clock = ward_core::clock::OffsetClock::default();
        let tokens = tokens(&store, &clock).await;

        let old = tokens.mint("alice").unwrap();
        assert_eq!(tokens.verify(&old).await.unwrap().sub, "alice");
        // A second key signs from the next refresh on; the first still verifies.
        let new_kid = rotate_key(store.as_ref(), secret(), clock.now_millis()).await.unwrap();
        tokens.refresh().await.unwrap();
        let new = tokens.mint("bob").unwrap();
        assert_eq!(kid_of(&new), new_kid);
        assert!(tokens.verify(&old).await.is_ok(), "a cache hit while its key is loaded");

        // Deleting the old key does nothing until the key set is re-read…
        store.delete_signing_key(&kid_of(&old)).await.unwrap();
        assert!(tokens.verify(&old).await.is_ok());
        // …and then the cached token is refused, while the new key's still work.
        tokens.refresh().await.unwrap();
        assert!(matches!(tokens.verify(&old).await, Err(Error::Unauthenticated(_))));
        assert!(matches!(tokens.verify(&old).await, Err(Error::Unauthenticated(_))));
        assert_eq!(tokens.verify(&new).await.unwrap().sub, "bob");
    }

    #[tokio::test]
    async fn a_deleted_key_stops_its_cached_tokens_after_a_reload() {
        let db = ward_store::testing::sqlite();
        let store = ward_store::open(&db.url).await.unwrap();
        let clock = ward_core::clock::OffsetClock::default();
        let tokens = tokens(&store, &clock).await;
        let old = tokens.mint("alice").unwrap();
        assert!(tokens.verify(&old).await.is_ok());

        rotate_key(store.as_ref(), secret(), clock.now_millis()).await.unwrap();
        store.delete_signing_key(&kid_of(&old)).await.unwrap();
        assert!(tokens.verify(&old).await.is_ok(), "still cached, key still loaded");

        // Another replica signs with the new key: its unknown kid makes this
        // one reload the key set, which drops the deleted key.
        clock.advance_millis(KEY_RELOAD_INTERVAL_MS);
        let other = self::tokens(&store, &clock).await;
        let fresh = other.mint("bob").unwrap();
        assert_eq!(tokens.verify(&fresh).await.unwrap().sub, "bob");
        assert!(matches!(tokens.verify(&old).await, Err(Error::Unauthenticated(_))));
    }

    #[tokio::test]
    async fn signing_keys_are_sealed_at_rest_and_legacy_keys_still_load() {
        let db = ward_store::testing::sqlite();
        let store = ward_store::open(&db.url).await.unwrap();
        let clock = ward_core::clock::OffsetClock::default();
        let tokens = tokens(&store, &clock).await;
        let first = store.signing_keys().await.unwrap().remove(0);
        assert!(
            first.private_key.starts_with(SEALED_KEY_PREFIX),
            "the first key is sealed"
        );
        // Another server key cannot use it.
        let wrong = Tokens::load(
            store.clone(),
            Arc::new(clock.clone()),
            ISS.into(),
            AUD.into(),
            ServerSecret::random(),
        );
        assert!(
            wrong.await.is_err(),
            "a different secret key does not open the signing key"
        );
        // A key stored in the clear (before sealing) still loads and verifies.
        let legacy = generate_key(clock.now_millis() + 1).unwrap();
        store.insert_signing_key(&legacy).await.unwrap();
        tokens.refresh().await.unwrap();
        let t = tokens.mint("carol").unwrap();
        assert_eq!(kid_of(&t), legacy.kid);
        assert_eq!(tokens.verify(&t).await.unwrap().sub, "carol");
        // Rotation seals.
        rotate_key(store.as_ref(), secret(), clock.now_millis() + 2)
            .await
            .unwrap();
        let newest = store.signing_keys().await.unwrap().pop().unwrap();
        assert!(newest.private_key.starts_with(SEALED_KEY_PREFIX));
        // A key sealed under another secret key (a misconfigured replica's)
        // is skipped for signing but still verifies: tokens keep working.
        let other_secret = ServerSecret::random();
        rotate_key(store.as_ref(), &other_secret, clock.now_millis() + 3)
            .await
            .unwrap();
        tokens.refresh().await.unwrap();
        let t = tokens.mint("dave").unwrap();
        assert_eq!(kid_of(&t), newest.kid, "signs with the newest key it can open");
        let replica = Tokens::load(
            store.clone(),
            Arc::new(clock.clone()),
            ISS.into(),
            AUD.into(),
            other_secret,
        )
        .await
        .unwrap();
        let theirs = replica.mint("erin").unwrap();
        assert_eq!(tokens.verify(&theirs).await.unwrap().sub, "erin");
        assert_eq!(replica.verify(&t).await.unwrap().sub, "dave");
    }
}
