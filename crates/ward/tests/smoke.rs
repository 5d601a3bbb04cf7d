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

#[test]
fn the_log_scan_catches_credentials() {
    use common::log_scan::holds_credential;
    assert!(holds_credential(
        r#"{"fields":{"message":"bearer eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4eHh4In0.c2lnbmF0dXJl"}}"#
    ));
    assert!(!holds_credential(r#"{"fields":{"message":"group created"}}"#));
}
