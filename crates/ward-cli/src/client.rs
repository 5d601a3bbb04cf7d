//! A small REST client for the Ward API.

use std::time::Duration;

use anyhow::{Context as _, anyhow};
use serde::Serialize;
use serde::de::DeserializeOwned;

#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Client {
    /// A client for `api` sending `token` as bearer ("" sends none).
    pub fn new(api: &str, token: String) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .build()?;
        Ok(Self {
            http,
            base: api.trim_end_matches('/').to_owned(),
            token,
        })
    }

    /// Sends a request and decodes the JSON reply; an error reply becomes an
    /// error carrying the server's message.
    pub async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&B>,
    ) -> anyhow::Result<T> {
        let url = format!("{}{path}", self.base);
        let mut req = self.http.request(method.clone(), &url).query(query);
        if !self.token.is_empty() {
            req = req.bearer_auth(&self.token);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.with_context(|| format!("{method} {url}"))?;
        let status = resp.status();
        let bytes = resp
            .bytes()
            .await
            .with_context(|| format!("reading the reply to {method} {url}"))?;
        if !status.is_success() {
            let message = serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
                .unwrap_or_else(|| String::from_utf8_lossy(&bytes).into_owned());
            return Err(anyhow!("{message} (HTTP {})", status.as_u16()));
        }
        serde_json::from_slice(&bytes).with_context(|| format!("decoding the reply to {method} {url}"))
    }
}
