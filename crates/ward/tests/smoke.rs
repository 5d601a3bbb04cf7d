//! The harness itself works on every backend.

mod common;

#[tokio::test]
async fn server_starts_and_creates_a_group() {
    for s in common::servers().await {
        let org = s.create_group(None, "acme").await;
        assert_eq!(org["name"], "acme");
        let (status, body) = s.get("/healthz").await;
        assert!(status.is_success(), "{body}");
    }
}
