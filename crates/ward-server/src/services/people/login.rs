//! Browser login for people (OAuth 2.0 authorization code with PKCE, twice).
//!
//! 1. The CLI opens `/oauth?idp_id=…&redirect=<loopback>&state=S&code_challenge=C`.
//!    Ward checks the redirect is loopback, and answers with a redirect to the
//!    identity provider's authorization endpoint. What Ward must remember
//!    (provider, nonce, its own PKCE verifier, the CLI's redirect, state and
//!    challenge) travels sealed inside the `state` it sends, so starting a
//!    login writes nothing.
//! 2. The provider sends the browser to `/oauth/callback?code=…&state=…`. The
//!    state must open with the server's key, be fresh, and not have been used
//!    (recorded once, so a replay fails). Ward redeems the code at the
//!    provider's token endpoint (with its PKCE verifier and client secret),
//!    verifies the ID token (signature by the provider's keys, issuer,
//!    audience = client id, nonce, times), finds or creates the person
//!    (a root identity, claim-matched on issuer and subject; the default role
//!    bound on the first login only), works out the roles the person's
//!    provider groups map to, and redirects to the CLI's loopback with a
//!    sealed one-time handoff code.
//! 3. The CLI posts the code with its PKCE verifier to `/oauth/token` and
//!    receives a Ward token. The handoff code is useless without the verifier
//!    (another program on the machine that sees the redirect cannot use it),
//!    expires in two minutes and works once.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use ward_auth::secret::Purpose;
use ward_auth::upstream::Unverified;
use ward_auth::{Actor, Audience, Grant, SessionRole};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::iam::v2::{ClaimMatch, RelationshipType, claim_match};
use ward_store::people::{DeviceLoginRecord, IDENTITY_PROVIDER_TYPE, IdentityProviderRecord, PersonRecord};
use ward_store::{IdentityRecord, RoleBindingRecord};

use super::providers::stored_oidc;
use crate::services::identities::registered_identity_uid;
use crate::ward::Ward;

/// How long a person has to finish at their identity provider.
pub const LOGIN_TTL_SECS: i64 = 10 * 60;
/// How long the CLI has to redeem its handoff code.
pub const HANDOFF_TTL_SECS: i64 = 120;
/// Most provider groups a login considers.
pub const MAX_GROUPS: usize = 200;
/// Bounds on what the CLI sends.
const MAX_STATE_LEN: usize = 512;
const MAX_REDIRECT_LEN: usize = 512;
const MAX_CODE_LEN: usize = 4096;

/// What a login start asks for.
#[derive(Debug, Default)]
pub struct LoginStart {
    pub idp_id: String,
    pub redirect: String,
    pub state: String,
    pub code_challenge: String,
    pub code_challenge_method: String,
}

/// What travels sealed in the `state` sent to the identity provider.
#[derive(Serialize, Deserialize)]
struct State {
    /// A random id: recorded when used, so the state works once.
    id: String,
    idp: String,
    nonce: String,
    /// Ward's PKCE verifier at the provider ("" when the provider has PKCE off).
    verifier: String,
    redirect: String,
    cli_state: String,
    cli_challenge: String,
    exp: i64,
    /// A headless login: the device login (its id) the result goes to,
    /// instead of a loopback redirect.
    #[serde(default)]
    device: String,
}

/// What the handoff code carries to `/oauth/token`.
#[derive(Serialize, Deserialize)]
struct Handoff {
    id: String,
    sub: String,
    roles: Vec<SessionRole>,
    act_iss: String,
    act_sub: String,
    act_aud: String,
    challenge: String,
    exp: i64,
}

/// Where the browser goes after the provider's callback.
pub enum Callback {
    /// The CLI's loopback, with the handoff code (or the provider's error).
    Redirect(String),
    /// A headless login finished: the CLI collects it by polling.
    DeviceDone,
}

/// A headless login, as the CLI starts it (RFC 8628's answer).
#[derive(Debug, Serialize)]
pub struct DeviceStart {
    pub device_code: String,
    pub user_code: String,
    pub verification_uri: String,
    pub verification_uri_complete: String,
    pub expires_in: i64,
    pub interval: i64,
}

/// Seconds between the CLI's polls of a headless login.
pub const DEVICE_POLL_SECS: i64 = 5;

/// User codes: 8 letters without vowels (no words, no look-alikes),
/// shown as XXXX-XXXX: 20^8 ≈ 2.6e10 codes.
const USER_CODE_LETTERS: &[u8] = b"BCDFGHJKLMNPQRSTVWXZ";

fn user_code() -> String {
    use rand::Rng as _;
    let mut rng = rand::thread_rng();
    let letters: String = (0..8)
        .map(|_| USER_CODE_LETTERS[rng.gen_range(0..USER_CODE_LETTERS.len())] as char)
        .collect();
    format!("{}-{}", &letters[..4], &letters[4..])
}

/// A typed user code as stored: upper case, the dash where it belongs,
/// spaces and other dashes ignored.
fn normalize_user_code(typed: &str) -> Option<String> {
    if typed.len() > 64 {
        return None;
    }
    let letters: String = typed
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '-')
        .map(|c| c.to_ascii_uppercase())
        .collect();
    (letters.len() == 8 && letters.bytes().all(|b| USER_CODE_LETTERS.contains(&b)))
        .then(|| format!("{}-{}", &letters[..4], &letters[4..]))
}

/// How a device code is stored: its SHA-256, hex.
fn device_id(device_code: &str) -> String {
    hex::encode(Sha256::digest(device_code.as_bytes()))
}

/// A finished login, handed to the CLI.
pub struct LoginToken {
    pub token: String,
    pub expiry_secs: i64,
    pub identity: String,
}

fn random_text(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    rand::RngCore::fill_bytes(&mut rand::thread_rng(), &mut b);
    URL_SAFE_NO_PAD.encode(b)
}

/// `base64url(sha256(verifier))`, PKCE's S256.
pub fn s256(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// Only a loopback http URL may receive a login's result (RFC 8252 §7.3).
fn check_redirect(redirect: &str) -> Result<()> {
    let bad = || {
        Error::invalid(
            "redirect",
            "redirect must be an http URL on this machine's loopback (127.0.0.1, [::1] or localhost)",
        )
    };
    if redirect.len() > MAX_REDIRECT_LEN {
        return Err(bad());
    }
    let url = url::Url::parse(redirect).map_err(|_| bad())?;
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    if url.scheme() != "http"
        || !loopback
        || !url.username().is_empty()
        || url.password().is_some()
        || url.fragment().is_some()
    {
        return Err(bad());
    }
    Ok(())
}

/// The CLI's PKCE challenge: S256 output, 43 base64url characters.
fn check_challenge(challenge: &str) -> Result<()> {
    let ok = challenge.len() == 43
        && challenge
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            "code_challenge",
            "code_challenge is required: base64url(SHA-256(code_verifier)), 43 characters",
        ))
    }
}

/// `base` with `params` appended to its query.
fn with_query(base: &str, params: &[(&str, &str)]) -> Result<String> {
    let mut url = url::Url::parse(base).map_err(|_| Error::internal(format_args!("{base} is not a URL")))?;
    url.query_pairs_mut().extend_pairs(params.iter());
    Ok(url.into())
}

fn login_failed(msg: impl Into<String>) -> Error {
    Error::Unauthenticated(msg.into())
}

/// A name for a new person's identity from their email or name: the name
/// rules' characters only, 3 to 63 long.
fn person_name(email: &str, name: &str) -> String {
    let source = if email.is_empty() {
        name
    } else {
        email.split('@').next().unwrap_or("")
    };
    let mut out: String = source
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        // Names are lowercase (the name rule every other identity follows).
        .map(|c| c.to_ascii_lowercase())
        .take(63)
        .collect();
    if out.len() < 3 || !out.bytes().any(|b| b.is_ascii_alphanumeric()) {
        out = format!("person-{out}");
        out.truncate(63);
    }
    out
}

impl Ward {
    /// The identity provider `idp_id` names: its uid, or the name of a
    /// verified organization with exactly one identity provider.
    async fn login_provider(&self, idp_id: &str) -> Result<IdentityProviderRecord> {
        let unknown = || Error::not_found(IDENTITY_PROVIDER_TYPE, idp_id.chars().take(100).collect::<String>());
        if idp_id.is_empty() {
            return Err(Error::invalid("idp_id", "idp_id is required"));
        }
        if let Ok(uid) = Uidp::parse("idp_id", idp_id)
            && uid.parent().is_some()
        {
            return self.store.get_identity_provider(&uid).await?.ok_or_else(unknown);
        }
        // Verified organizations only, by name in the query itself: others
        // with the same name cannot crowd the verified one out.
        let orgs = self.store.verified_orgs_named(idp_id).await?;
        let [org] = orgs.as_slice() else {
            return Err(unknown());
        };
        let mut providers = self.store.identity_providers_of(&Uidp::parse("org", org)?).await?;
        if providers.len() != 1 {
            return Err(unknown());
        }
        Ok(providers.remove(0))
    }

    /// Step 1: the URL at the identity provider to send the browser to.
    pub async fn login_start(&self, req: LoginStart) -> Result<String> {
        check_redirect(&req.redirect)?;
        if req.state.is_empty() || req.state.len() > MAX_STATE_LEN {
            return Err(Error::invalid(
                "state",
                format!("state is required, at most {MAX_STATE_LEN} bytes"),
            ));
        }
        if !matches!(req.code_challenge_method.as_str(), "" | "S256") {
            return Err(Error::invalid(
                "code_challenge_method",
                "code_challenge_method must be S256",
            ));
        }
        check_challenge(&req.code_challenge)?;
        let idp = self.login_provider(&req.idp_id).await?;
        self.provider_redirect(&idp, req.redirect, req.state, req.code_challenge, String::new())
            .await
    }

    /// The URL at the provider's authorization endpoint for a login whose
    /// result goes to `redirect` (with `cli_state`) or to a device login.
    async fn provider_redirect(
        &self,
        idp: &IdentityProviderRecord,
        redirect: String,
        cli_state: String,
        cli_challenge: String,
        device: String,
    ) -> Result<String> {
        let oidc = stored_oidc(idp)?;
        let discovery = self.upstream.discovery(&idp.issuer).await?;
        let endpoint = discovery
            .get("authorization_endpoint")
            .and_then(Value::as_str)
            .filter(|e| e.starts_with("https://") || e.starts_with("http://"))
            .ok_or_else(|| login_failed("the identity provider's discovery document has no authorization_endpoint"))?;
        let state = State {
            id: random_text(16),
            idp: idp.uid.clone(),
            nonce: random_text(16),
            verifier: if oidc.pkce_enabled {
                random_text(32)
            } else {
                String::new()
            },
            redirect,
            cli_state,
            cli_challenge,
            exp: self.clock.now_secs() + LOGIN_TTL_SECS,
            device,
        };
        let sealed = self.secret.seal_text(
            Purpose::LoginState,
            &serde_json::to_vec(&state).map_err(|e| Error::internal(format_args!("encode state: {e}")))?,
        );
        let mut scopes = vec!["openid", "email", "profile"];
        for s in &oidc.additional_scopes {
            if !scopes.contains(&s.as_str()) {
                scopes.push(s);
            }
        }
        let scope = scopes.join(" ");
        let callback = self.login_callback_url();
        let challenge = s256(&state.verifier);
        let mut params = vec![
            ("response_type", "code"),
            ("client_id", oidc.client_id.as_str()),
            ("redirect_uri", callback.as_str()),
            ("scope", scope.as_str()),
            ("state", sealed.as_str()),
            ("nonce", state.nonce.as_str()),
        ];
        if oidc.pkce_enabled {
            params.push(("code_challenge", challenge.as_str()));
            params.push(("code_challenge_method", "S256"));
        }
        with_query(endpoint, &params)
    }

    /// Where identity providers send people back: `{issuer}/oauth/callback`.
    pub fn login_callback_url(&self) -> String {
        format!("{}/oauth/callback", self.tokens.issuer())
    }

    fn open_state(&self, sealed: &str) -> Result<State> {
        let invalid = || Error::invalid("state", "the login state is not valid; start the login again");
        if sealed.len() > 4 * MAX_STATE_LEN + 2 * MAX_REDIRECT_LEN + 512 {
            return Err(invalid());
        }
        let plain = self.secret.open_text(Purpose::LoginState, sealed).ok_or_else(invalid)?;
        serde_json::from_slice(&plain).map_err(|_| invalid())
    }

    /// Step 2: the identity provider's answer. Returns where to send the
    /// browser: the CLI's loopback, with a handoff code or an error.
    pub async fn login_callback(&self, code: &str, sealed_state: &str, error: Option<&str>) -> Result<Callback> {
        let r = self.login_callback_checked(code, sealed_state, error).await;
        metrics::counter!("ward_logins_total", "flow" => "browser", "outcome" => crate::telemetry::outcome(&r))
            .increment(1);
        r
    }

    async fn login_callback_checked(&self, code: &str, sealed_state: &str, error: Option<&str>) -> Result<Callback> {
        let state = self.open_state(sealed_state)?;
        let now = self.clock.now_secs();
        if state.exp <= now {
            return Err(Error::invalid("state", "the login took too long; start it again"));
        }
        if !self
            .store
            .use_once(&format!("state:{}", state.id), state.exp * 1000, now * 1000)
            .await?
        {
            return Err(Error::invalid(
                "state",
                "this login was already completed; start a new one",
            ));
        }
        if let Some(err) = error {
            let err: String = err.chars().filter(char::is_ascii_graphic).take(64).collect();
            if !state.device.is_empty() {
                return Err(login_failed(format!("the identity provider refused the login: {err}")));
            }
            return with_query(
                &state.redirect,
                &[("error", err.as_str()), ("state", state.cli_state.as_str())],
            )
            .map(Callback::Redirect);
        }
        if code.is_empty() || code.len() > MAX_CODE_LEN {
            return Err(Error::invalid("code", "the identity provider sent no valid code"));
        }
        let idp_uid = Uidp::parse("state", &state.idp)?;
        let idp = self
            .store
            .get_identity_provider(&idp_uid)
            .await?
            .ok_or_else(|| login_failed("the identity provider was deleted during the login"))?;
        let oidc = stored_oidc(&idp)?;
        let id_token = self.redeem_code(&idp, &oidc, code, &state.verifier).await?;
        let claims = self
            .verify_id_token(&idp, &oidc.client_id, &id_token, &state.nonce)
            .await?;
        let sub = claims
            .str_claim("sub")
            .filter(|s| !s.is_empty() && s.len() <= 255)
            .ok_or_else(|| login_failed("the ID token has no usable sub claim"))?
            .to_owned();
        let text = |name: &str, max: usize| {
            claims
                .str_claim(name)
                .filter(|v| v.len() <= max && !v.chars().any(char::is_control))
                .unwrap_or("")
                .to_owned()
        };
        let email = text("email", 320);
        let display_name = text("name", 256);
        let email_verified = claims
            .claims
            .get("email_verified")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let groups: Vec<String> = if oidc.groups_claim.is_empty() {
            Vec::new()
        } else {
            claims
                .claims
                .get(&oidc.groups_claim)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .filter(|g| g.len() <= 256)
                        .take(MAX_GROUPS)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        let identity = self
            .person_logged_in(&idp, &oidc.client_id, &sub, &email, email_verified, &display_name)
            .await?;
        let roles = self
            .mapped_roles(&idp.uid, &groups)
            .await?
            .into_iter()
            .map(|(scope, role)| SessionRole { scope, role })
            .collect();
        let handoff = Handoff {
            id: random_text(16),
            sub: identity,
            roles,
            act_iss: idp.issuer.clone(),
            act_sub: sub,
            act_aud: oidc.client_id.clone(),
            challenge: state.cli_challenge,
            exp: now + HANDOFF_TTL_SECS,
        };
        let sealed = self.secret.seal_text(
            Purpose::LoginHandoff,
            &serde_json::to_vec(&handoff).map_err(|e| Error::internal(format_args!("encode handoff: {e}")))?,
        );
        if !state.device.is_empty() {
            if !self
                .store
                .finish_device_login(&state.device, &sealed, now * 1000)
                .await?
            {
                return Err(Error::invalid(
                    "state",
                    "this headless login expired or was finished already; start it again in your terminal",
                ));
            }
            return Ok(Callback::DeviceDone);
        }
        with_query(
            &state.redirect,
            &[("code", sealed.as_str()), ("state", state.cli_state.as_str())],
        )
        .map(Callback::Redirect)
    }

    /// Headless login, step 1 (the CLI): a device login, with the user code
    /// the person types in a browser anywhere. `client` is the address that
    /// asks (each holds at most a few pending logins).
    pub async fn device_start(&self, idp_id: &str, code_challenge: &str, client: &str) -> Result<DeviceStart> {
        check_challenge(code_challenge)?;
        let idp = self.login_provider(idp_id).await?;
        let now_ms = self.clock.now_millis();
        let device_code = random_text(32);
        let mut tries = 0;
        loop {
            let user_code = user_code();
            let record = DeviceLoginRecord {
                id: device_id(&device_code),
                user_code: user_code.clone(),
                idp_uid: idp.uid.clone(),
                challenge: code_challenge.to_owned(),
                handoff: None,
                expire_time: now_ms + LOGIN_TTL_SECS * 1000,
            };
            match self
                .store
                .create_device_login(&record, client, self.max_pending_logins_per_client, now_ms)
                .await
            {
                Ok(()) => {
                    let verification_uri = format!("{}/oauth/device", self.tokens.issuer());
                    return Ok(DeviceStart {
                        verification_uri_complete: with_query(&verification_uri, &[("user_code", &user_code)])?,
                        verification_uri,
                        device_code,
                        user_code,
                        expires_in: LOGIN_TTL_SECS,
                        interval: DEVICE_POLL_SECS,
                    });
                }
                // A user code already in use: draw another.
                Err(Error::AlreadyExists { .. }) if tries < 3 => tries += 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// The identity provider of a pending headless login, by its user code
    /// as a person typed it.
    pub async fn device_pending(&self, typed: &str) -> Result<(DeviceLoginRecord, IdentityProviderRecord)> {
        let unknown = || {
            Error::invalid(
                "user_code",
                "no login in progress has this code; check it in your terminal",
            )
        };
        let code = normalize_user_code(typed).ok_or_else(unknown)?;
        let login = self
            .store
            .pending_device_login(&code, self.clock.now_millis())
            .await?
            .ok_or_else(unknown)?;
        let idp = self
            .store
            .get_identity_provider(&Uidp::parse("idp", &login.idp_uid)?)
            .await?
            .ok_or_else(|| login_failed("the identity provider was deleted during the login"))?;
        Ok((login, idp))
    }

    /// Headless login, step 2 (the person, in a browser): the confirmed user
    /// code starts the login at the provider; its result goes to the device
    /// login, for the CLI's next poll.
    pub async fn device_confirm(&self, typed: &str) -> Result<String> {
        let (login, idp) = self.device_pending(typed).await?;
        self.provider_redirect(&idp, String::new(), String::new(), login.challenge, login.id)
            .await
    }

    /// Headless login, step 3 (the CLI polls): `Ok(None)` while the person
    /// has not finished.
    pub async fn device_token(&self, device_code: &str, verifier: &str) -> Result<Option<LoginToken>> {
        let r = self.device_token_checked(device_code, verifier).await;
        // A poll before the person finished is not an outcome yet.
        if !matches!(r, Ok(None)) {
            metrics::counter!("ward_logins_total", "flow" => "device", "outcome" => crate::telemetry::outcome(&r))
                .increment(1);
        }
        r
    }

    async fn device_token_checked(&self, device_code: &str, verifier: &str) -> Result<Option<LoginToken>> {
        if device_code.len() > 128 {
            return Err(Error::invalid("device_code", "the device code is not valid"));
        }
        let now_ms = self.clock.now_millis();
        let challenge = s256(verifier);
        let Some(login) = self
            .store
            .take_device_login(&device_id(device_code), &challenge, now_ms)
            .await?
        else {
            return Err(Error::invalid(
                "device_code",
                "the device code is not valid or has expired; log in again",
            ));
        };
        match login.handoff {
            None => Ok(None),
            // A wrong verifier leaves the finished login for the right one.
            Some(_) if login.challenge != challenge => Err(Error::invalid(
                "code_verifier",
                "code_verifier does not match the login's code_challenge",
            )),
            Some(handoff) => self.login_token(&handoff, verifier).await.map(Some),
        }
    }

    /// Redeems the provider's code at its token endpoint for an ID token.
    async fn redeem_code(
        &self,
        idp: &IdentityProviderRecord,
        oidc: &ward_proto::iam::v2::identity_provider::Oidc,
        code: &str,
        verifier: &str,
    ) -> Result<String> {
        let discovery = self.upstream.discovery(&idp.issuer).await?;
        let endpoint = discovery
            .get("token_endpoint")
            .and_then(Value::as_str)
            .ok_or_else(|| login_failed("the identity provider's discovery document has no token_endpoint"))?;
        let secret = self.client_secret(idp)?;
        // client_secret_basic unless the provider supports only _post.
        let post_only = discovery
            .get("token_endpoint_auth_methods_supported")
            .and_then(Value::as_array)
            .is_some_and(|m| {
                m.iter().any(|v| v == "client_secret_post") && !m.iter().any(|v| v == "client_secret_basic")
            });
        let callback = self.login_callback_url();
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", callback.as_str()),
            ("client_id", oidc.client_id.as_str()),
        ];
        if !verifier.is_empty() {
            form.push(("code_verifier", verifier));
        }
        let mut basic = None;
        if let Some(s) = secret.as_deref() {
            if post_only {
                form.push(("client_secret", s));
            } else {
                basic = Some((oidc.client_id.as_str(), s));
            }
        }
        let answer = self.upstream.post_form(endpoint, &form, basic).await?;
        match answer.get("id_token").and_then(Value::as_str) {
            Some(t) => Ok(t.to_owned()),
            None => {
                let why: String = answer
                    .get("error_description")
                    .or_else(|| answer.get("error"))
                    .and_then(Value::as_str)
                    .unwrap_or("no id_token in its answer")
                    .chars()
                    .take(200)
                    .collect();
                Err(login_failed(format!("the identity provider refused the code: {why}")))
            }
        }
    }

    /// Verifies an ID token: the provider's keys, its issuer, our client id
    /// as audience, the login's nonce, and its times.
    async fn verify_id_token(
        &self,
        idp: &IdentityProviderRecord,
        client_id: &str,
        raw: &str,
        nonce: &str,
    ) -> Result<Unverified> {
        let token = Unverified::peek(raw)?;
        token.check_times(self.clock.now_secs())?;
        if token.str_claim("iss").map(|i| i.trim_end_matches('/')) != Some(idp.issuer.as_str()) {
            return Err(login_failed("the ID token is from another issuer"));
        }
        let keys = self.upstream.keys(&idp.issuer, false).await?;
        let unknown_kid = token
            .header
            .kid
            .as_ref()
            .is_some_and(|kid| !keys.keys.iter().any(|k| k.common.key_id.as_ref() == Some(kid)));
        let keys = if unknown_kid {
            self.upstream.keys(&idp.issuer, true).await?
        } else {
            keys
        };
        token.verify_signature(&keys)?;
        if !token.audiences().iter().any(|a| a == client_id) {
            return Err(login_failed("the ID token is not for this client (aud)"));
        }
        if token.str_claim("nonce") != Some(nonce) {
            return Err(login_failed("the ID token's nonce does not match this login"));
        }
        Ok(token)
    }

    /// Finds or creates the person's identity; binds the provider's default
    /// role at its organization when the identity is new. Returns its uid.
    async fn person_logged_in(
        &self,
        idp: &IdentityProviderRecord,
        client_id: &str,
        sub: &str,
        email: &str,
        email_verified: bool,
        display_name: &str,
    ) -> Result<String> {
        let now = self.clock.now_millis();
        let uid = registered_identity_uid(&idp.issuer, sub);
        let relationship = ClaimMatch {
            iss: Some(claim_match::Iss::Issuer(idp.issuer.clone())),
            sub: Some(claim_match::Sub::Subject(sub.to_owned())),
            aud: Some(claim_match::Aud::Audience(client_id.to_owned())),
            ..Default::default()
        };
        let identity = IdentityRecord {
            uid: uid.clone(),
            parent_uid: None,
            name: person_name(email, display_name),
            description: format!("Logged in through {}", idp.name),
            company: String::new(),
            relationship_type: RelationshipType::ClaimMatch as i64,
            relationship: serde_json::to_string(&relationship)
                .map_err(|e| Error::internal(format_args!("encode relationship: {e}")))?,
            issuer: idp.issuer.clone(),
            subject: sub.to_owned(),
            last_seen_time: Some(now),
            create_time: now,
            update_time: now,
        };
        let person = PersonRecord {
            identity_uid: uid.clone(),
            identity_provider_uid: idp.uid.clone(),
            email: email.to_owned(),
            email_verified,
            display_name: display_name.to_owned(),
        };
        let org = Uidp::parse("parent", &idp.parent_uid)?;
        let binding = RoleBindingRecord {
            uid: org.new_child().into(),
            parent_uid: org.as_str().into(),
            identity_uid: uid.clone(),
            role_uid: idp.default_role.clone(),
            create_time: now,
            update_time: now,
        };
        let created = self.store.record_login(&identity, &person, Some(&binding), now).await?;
        if created {
            self.grants_changed().await;
            tracing::info!(identity = %uid, idp = %idp.uid, "person registered at first login");
        }
        Ok(uid)
    }

    /// Step 3: the CLI redeems its handoff code with its PKCE verifier.
    pub async fn login_token(&self, code: &str, verifier: &str) -> Result<LoginToken> {
        let invalid = |msg: &str| Error::invalid("code", msg.to_owned());
        if code.len() > 8192 {
            return Err(invalid("the code is not valid"));
        }
        let plain = self
            .secret
            .open_text(Purpose::LoginHandoff, code)
            .ok_or_else(|| invalid("the code is not valid"))?;
        let h: Handoff = serde_json::from_slice(&plain).map_err(|_| invalid("the code is not valid"))?;
        let now = self.clock.now_secs();
        if h.exp <= now {
            return Err(invalid("the code has expired; log in again"));
        }
        if verifier.len() < 43 || verifier.len() > 128 || s256(verifier) != h.challenge {
            return Err(Error::invalid(
                "code_verifier",
                "code_verifier does not match the login's code_challenge",
            ));
        }
        if !self
            .store
            .use_once(&format!("handoff:{}", h.id), h.exp * 1000, now * 1000)
            .await?
        {
            return Err(invalid("the code was already used"));
        }
        let grant = Grant {
            subject: h.sub.clone(),
            act: Some(Actor {
                iss: h.act_iss,
                sub: h.act_sub,
                aud: Audience::One(h.act_aud),
            }),
            roles: (!h.roles.is_empty()).then_some(h.roles),
            ..Grant::default()
        };
        let (token, expiry_secs) = self.tokens.mint_grant(&grant)?;
        Ok(LoginToken {
            token,
            expiry_secs,
            identity: h.sub,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_redirects() {
        for ok in [
            "http://127.0.0.1:5000/callback",
            "http://[::1]:80/cb",
            "http://localhost:1/x?y=z",
            "http://127.1.2.3:9/",
        ] {
            assert!(check_redirect(ok).is_ok(), "{ok}");
        }
        for bad in [
            "https://127.0.0.1/cb",
            "http://10.0.0.1/cb",
            "http://127.0.0.1.evil.example/cb",
            "http://localhost.evil.example/cb",
            "http://user@127.0.0.1/cb",
            "http://127.0.0.1/cb#frag",
            "javascript:alert(1)",
            "//127.0.0.1/cb",
            "",
        ] {
            assert!(check_redirect(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn user_codes() {
        let c = user_code();
        assert_eq!(normalize_user_code(&c).as_deref(), Some(c.as_str()));
        assert_eq!(
            normalize_user_code(&c.to_lowercase().replace('-', " ")).as_deref(),
            Some(c.as_str())
        );
        for bad in ["", "BCDF-GHJ", "BCDF-GHJKL", "ABCD-EFGH", "BCDF GHJ1"] {
            assert_eq!(normalize_user_code(bad), None, "{bad}");
        }
    }

    #[test]
    fn person_names_follow_the_name_rules() {
        assert_eq!(person_name("alice@example.com", ""), "alice");
        assert_eq!(person_name("", "Bo"), "person-bo");
        assert_eq!(person_name("Alice.Smith@example.com", ""), "alice.smith");
        assert_eq!(person_name("a<b>\"c@x", ""), "abc");
        assert_eq!(person_name("a!@x", ""), "person-a");
        assert_eq!(person_name(&"x".repeat(100), "").len(), 63);
        for (email, name) in [("...@x", ""), ("", "Zoë Ünïcode"), ("A-B_C.D@x", ""), ("", "")] {
            let mut bad = Vec::new();
            ward_core::names::check_name("name", &person_name(email, name), &mut bad);
            assert!(bad.is_empty(), "{email:?} {name:?} → {:?}", person_name(email, name));
        }
    }

    #[test]
    /// The expected value was computed independently (Python's hashlib).
    fn s256_is_unpadded_base64url_of_sha256() {
        assert_eq!(
            s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gQFzFEjXk"),
            "gMbWk4GYVB7-tcD28aoyhPuPZIsIrAXYJ8uY1G51PyM"
        );
    }
}
