//! Opaque, signed page tokens (AIP-158).
//!
//! A token is `base64url(json payload || HMAC-SHA256(payload)[..16])`. The payload
//! carries the keyset cursor, a hash of the query it belongs to and its issue
//! time. The HMAC key lives in the database, so tokens survive restarts and work
//! on any replica sharing it. Tampering, or reuse with another filter or order, is
//! INVALID_ARGUMENT; a token older than [`TOKEN_LIFETIME_MS`] restarts the listing
//! from the first page without an error.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::listing::Cursor;

/// Three days.
pub const TOKEN_LIFETIME_MS: i64 = 3 * 24 * 60 * 60 * 1000;
const MAC_LEN: usize = 16;
/// Far larger than any token Ward issues; bounds the work done on garbage input.
const MAX_TOKEN_LEN: usize = 4096;

#[derive(Serialize, Deserialize)]
struct Payload {
    /// Query hash (hex, 16 bytes).
    q: String,
    /// Cursor.
    c: Cursor,
    /// Issue time, ms since epoch.
    t: i64,
    /// Results skipped by `skip` on the pages before (the response's
    /// `skipped` accumulates across pages).
    #[serde(default)]
    s: i32,
}

/// Signs and checks page tokens with one secret key.
#[derive(Clone)]
pub struct PageTokens {
    key: Vec<u8>,
}

impl std::fmt::Debug for PageTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PageTokens(<secret>)")
    }
}

fn invalid() -> Error {
    Error::invalid("page_token", "page_token is not a valid page token for this query")
}

fn query_hash(fingerprint: &str) -> String {
    hex::encode(&Sha256::digest(fingerprint.as_bytes())[..16])
}

impl PageTokens {
    pub fn new(key: Vec<u8>) -> Self {
        Self { key }
    }

    fn mac(&self, data: &[u8]) -> [u8; MAC_LEN] {
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.key).expect("HMAC accepts any key length");
        m.update(data);
        let full = m.finalize().into_bytes();
        let mut out = [0u8; MAC_LEN];
        out.copy_from_slice(&full[..MAC_LEN]);
        out
    }

    /// A token continuing after `cursor` in the query with this fingerprint,
    /// `skipped` results having been skipped so far.
    pub fn issue(&self, fingerprint: &str, cursor: &Cursor, skipped: i32, now_ms: i64) -> String {
        let payload = serde_json::to_vec(&Payload {
            q: query_hash(fingerprint),
            c: cursor.clone(),
            t: now_ms,
            s: skipped,
        })
        .expect("payload serializes");
        let mut bytes = payload.clone();
        bytes.extend_from_slice(&self.mac(&payload));
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The cursor in `token` and the results skipped before it, or `None`
    /// when the token has expired (restart).
    pub fn open(&self, token: &str, fingerprint: &str, now_ms: i64) -> Result<Option<(Cursor, i32)>> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(invalid());
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(token.trim_end_matches('='))
            .map_err(|_| invalid())?;
        if bytes.len() <= MAC_LEN {
            return Err(invalid());
        }
        let (payload, mac) = bytes.split_at(bytes.len() - MAC_LEN);
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.key).expect("HMAC accepts any key length");
        m.update(payload);
        // Constant-time check of the truncated tag.
        m.verify_truncated_left(mac).map_err(|_| invalid())?;
        let p: Payload = serde_json::from_slice(payload).map_err(|_| invalid())?;
        if now_ms.saturating_sub(p.t) > TOKEN_LIFETIME_MS {
            return Ok(None);
        }
        if p.q != query_hash(fingerprint) {
            return Err(Error::invalid(
                "page_token",
                "page_token was issued for a different filter or order_by; start again without it",
            ));
        }
        Ok(Some((p.c, p.s.max(0))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::listing::CursorKey;

    fn cursor() -> Cursor {
        Cursor {
            key: CursorKey::Text("eng".into()),
            uid: "u".into(),
        }
    }

    proptest::proptest! {
        /// Arbitrary strings never panic and are never accepted.
        #[test]
        fn garbage_is_rejected(s in ".{0,600}") {
            let t = PageTokens::new(b"secret".to_vec());
            proptest::prop_assert!(t.open(&s, "q1", 2000).is_err());
        }
    }

    #[test]
    fn round_trip_and_rejections() {
        let t = PageTokens::new(b"secret".to_vec());
        let tok = t.issue("q1", &cursor(), 7, 1000);
        assert_eq!(t.open(&tok, "q1", 2000).unwrap(), Some((cursor(), 7)));
        // Another query.
        assert!(t.open(&tok, "q2", 2000).is_err());
        // Another key (another deployment).
        assert!(PageTokens::new(b"other".to_vec()).open(&tok, "q1", 2000).is_err());
        // Tampered: flip one character.
        let mut chars: Vec<char> = tok.chars().collect();
        chars[3] = if chars[3] == 'A' { 'B' } else { 'A' };
        let tampered: String = chars.into_iter().collect();
        assert!(t.open(&tampered, "q1", 2000).is_err());
        assert!(t.open("not base64 !", "q1", 2000).is_err());
        assert!(t.open("", "q1", 2000).is_err());
        // Expired: restart, no error.
        assert_eq!(t.open(&tok, "q1", 1000 + TOKEN_LIFETIME_MS + 1).unwrap(), None);
    }
}
