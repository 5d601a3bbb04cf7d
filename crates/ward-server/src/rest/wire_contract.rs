//! Holds the REST route table to the HTTP bindings of the public wire
//! contract (`shared/spec/wire-contract.json`): every RPC the table binds
//! under a contract service has the contract's method, path template and
//! body, and every binding the contract gives such an RPC is served. The
//! message shapes are held to it by `ward-proto`'s `wire_contract` test.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::table::Endpoint;

fn contract() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/spec/wire-contract.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).expect("the contract is JSON")
}

/// `(method, path, body)` of one binding.
type Http = (String, String, String);

fn http_of(v: &Value) -> Http {
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    (s("method"), s("path"), s("body"))
}

/// Every contract binding, by RPC name (`package.Service.Method`).
fn contract_bindings(c: &Value) -> BTreeMap<String, Vec<Http>> {
    let mut out = BTreeMap::new();
    for (service, def) in c["services"].as_object().expect("services") {
        for (method, m) in def["methods"].as_object().expect("methods") {
            let Some(http) = m.get("http") else { continue };
            let mut all = vec![http_of(http)];
            for extra in http.get("additional").and_then(Value::as_array).into_iter().flatten() {
                all.push(http_of(extra));
            }
            out.insert(format!("{}.{method}", service.trim_start_matches('.')), all);
        }
    }
    out
}

/// Ward's bindings of contract RPCs, by RPC name.
fn ward_bindings() -> BTreeMap<String, BTreeSet<Http>> {
    let mut out: BTreeMap<String, BTreeSet<Http>> = BTreeMap::new();
    for e in super::endpoints("") {
        if let Endpoint::Rpc(b) = e {
            out.entry(b.name.to_owned()).or_default().insert((
                b.method.to_string(),
                b.path.to_owned(),
                b.body.to_owned(),
            ));
        }
    }
    out
}

/// Bindings Ward serves beside the contract's, each with why it cannot
/// break a client: `(rpc, method, path)`.
const ADDED: &[(&str, &str, &str, &str)] = &[
    (
        "chainguard.platform.iam.v2.GroupsService.CreateGroup",
        "POST",
        "/iam/v2/groups",
        "a new organization (no parent) without the empty path segment; clients that do not know it never send it",
    ),
    (
        "chainguard.platform.iam.v2.GroupsService.CreateGroup",
        "POST",
        "/iam/v2/groups/",
        "the contract's template with an empty parent (grpc-gateway's `{parent=**}` matches no segment)",
    ),
    (
        "chainguard.platform.iam.v2beta1.GroupsService.CreateGroup",
        "POST",
        "/iam/v2beta1/groups",
        "as for v2",
    ),
    (
        "chainguard.platform.iam.v2beta1.GroupsService.CreateGroup",
        "POST",
        "/iam/v2beta1/groups/",
        "as for v2",
    ),
    (
        "chainguard.platform.events.Subscriptions.Create",
        "POST",
        "/events/v1/subscriptions",
        "the contract's template with no parent segment (grpc-gateway's `{parent_id=**}` matches none): the RPC \
         names the missing parent instead of a 405 from the List's path",
    ),
    (
        "chainguard.platform.events.v2beta1.SubscriptionsService.CreateSubscription",
        "POST",
        "/events/v2beta1/subscriptions",
        "as for v1",
    ),
    (
        "chainguard.platform.events.v2.SubscriptionsService.CreateSubscription",
        "POST",
        "/events/v2/subscriptions",
        "as for v1",
    ),
];

#[test]
fn rest_bindings_agree_with_the_contract() {
    let c = contract();
    let want = contract_bindings(&c);
    let mut problems = Vec::new();
    for (rpc, have) in ward_bindings() {
        let Some(contract) = want.get(&rpc) else { continue };
        for h in &have {
            let added = ADDED.iter().any(|(r, m, p, _)| *r == rpc && *m == h.0 && *p == h.1);
            if !contract.contains(h) && !added {
                problems.push(format!("{rpc}: Ward binds {h:?}; the contract has {contract:?}"));
            }
        }
        for h in contract {
            if !have.contains(h) {
                problems.push(format!("{rpc}: the contract binds {h:?}, which Ward does not serve"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} mismatches:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// RPCs Ward serves over REST outside the RPC table (raw endpoints with the
/// contract's paths): the token exchange and who-am-I.
const RAW_SERVED: &[&str] = &[
    "chainguard.platform.oidc.SecurityTokenService.Exchange",
    "chainguard.platform.auth.Auth.Validate",
];

#[test]
fn unserved_bindings_are_exactly_the_contracts_rpcs_without_a_route() {
    let have = ward_bindings();
    let mut want = BTreeSet::new();
    for (rpc, hs) in contract_bindings(&contract()) {
        if have.contains_key(&rpc) || RAW_SERVED.contains(&rpc.as_str()) {
            continue;
        }
        for (method, path, _) in hs {
            want.insert((method, path, rpc.clone()));
        }
    }
    let table: BTreeSet<(String, String, String)> = super::unserved::UNSERVED
        .iter()
        .map(|(m, p, r)| (m.to_string(), p.to_string(), r.to_string()))
        .collect();
    let missing: Vec<_> = want.difference(&table).collect();
    let extra: Vec<_> = table.difference(&want).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "UNSERVED lacks {missing:#?}\nand has what is served or not in the contract: {extra:#?}"
    );
}
