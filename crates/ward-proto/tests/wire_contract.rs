//! Ward's compiled descriptors held to the public API's wire contract
//! (`shared/spec/wire-contract.json`: the SDK's messages, enums and RPCs as
//! facts). Wherever Ward defines a message, enum or service under a name the
//! contract has, it must agree with it field by field: the same number,
//! type, label and JSON name, the same enum numbers, the same RPC input and
//! output. Ward's own additions are allowed only where [`ALLOWED`] says why:
//! request-side fields at numbers ≥ 100, and names the contract does not
//! have at all (Ward-only messages and packages).
//!
//! HTTP bindings are held to the contract by the REST router's own test
//! (`ward-server`, `rest::wire_contract`), which owns the route table.

use std::collections::{BTreeMap, BTreeSet};

use prost::Message as _;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, EnumDescriptorProto, FileDescriptorSet};
use serde_json::Value;

/// Where the contract lives, beside the project's checkout.
fn contract() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/spec/wire-contract.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).expect("the contract is JSON")
}

/// Ward's additions the contract does not have, each with why it cannot
/// break a client (see docs/api-conventions.md, "Wire contract").
/// `Message.field` for a field, `Service.Method` for an RPC.
const ALLOWED: &[(&str, &str)] = &[
    (
        ".chainguard.platform.iam.v2.GroupsService.ListGroupAccessRequests",
        "a Ward-only RPC (the requests RequestGroupAccess records); clients that do not know it never call it",
    ),
    (
        ".chainguard.platform.iam.v2beta1.GroupsService.ListGroupAccessRequests",
        "the same RPC under v2beta1",
    ),
    (
        ".chainguard.platform.vulnerabilities.v1.Advisories.Import",
        "a Ward-only RPC (bulk import of advisory documents); clients that do not know it never call it",
    ),
    (
        ".chainguard.platform.vulnerabilities.v1.Advisories.ImportOsv",
        "a Ward-only RPC (bulk import of OSV feed records); clients that do not know it never call it",
    ),
    (
        ".chainguard.platform.registry.Vulnerabilities.ExportVex",
        "a Ward-only RPC (an organization's OpenVEX document); clients that do not know it never call it",
    ),
    (
        ".chainguard.platform.registry.Vulnerabilities.ListAffectedImages",
        "a Ward-only RPC (every image affected by a vulnerability or alias); clients that do not know it never call it",
    ),
    (
        ".chainguard.platform.vulnerabilities.v1.Advisories.GetAdvisoryFlags",
        "a Ward-only RPC (what imports kept but flagged); clients that do not know it never call it",
    ),
];

fn type_name(t: Type) -> &'static str {
    match t {
        Type::Double => "double",
        Type::Float => "float",
        Type::Int64 => "int64",
        Type::Uint64 => "uint64",
        Type::Int32 => "int32",
        Type::Fixed64 => "fixed64",
        Type::Fixed32 => "fixed32",
        Type::Bool => "bool",
        Type::String => "string",
        Type::Group => "group",
        Type::Message => "message",
        Type::Bytes => "bytes",
        Type::Uint32 => "uint32",
        Type::Enum => "enum",
        Type::Sfixed32 => "sfixed32",
        Type::Sfixed64 => "sfixed64",
        Type::Sint32 => "sint32",
        Type::Sint64 => "sint64",
    }
}

/// Ward's messages and enums by full name (with the leading dot).
#[derive(Default)]
struct Ward {
    messages: BTreeMap<String, DescriptorProto>,
    enums: BTreeMap<String, EnumDescriptorProto>,
    /// `.package.Service` → method → (input, output).
    services: BTreeMap<String, BTreeMap<String, (String, String)>>,
}

impl Ward {
    fn load() -> Ward {
        let set = FileDescriptorSet::decode(ward_proto::FILE_DESCRIPTOR_SET).expect("descriptor set");
        let mut w = Ward::default();
        for f in &set.file {
            let pkg = format!(".{}", f.package());
            for m in &f.message_type {
                w.add_message(&pkg, m);
            }
            for e in &f.enum_type {
                w.enums.insert(format!("{pkg}.{}", e.name()), e.clone());
            }
            for s in &f.service {
                let methods = s
                    .method
                    .iter()
                    .map(|m| {
                        (
                            m.name().to_owned(),
                            (m.input_type().to_owned(), m.output_type().to_owned()),
                        )
                    })
                    .collect();
                w.services.insert(format!("{pkg}.{}", s.name()), methods);
            }
        }
        w
    }

    fn add_message(&mut self, scope: &str, m: &DescriptorProto) {
        let name = format!("{scope}.{}", m.name());
        for n in &m.nested_type {
            self.add_message(&name, n);
        }
        for e in &m.enum_type {
            self.enums.insert(format!("{name}.{}", e.name()), e.clone());
        }
        self.messages.insert(name, m.clone());
    }
}

fn allowed(key: &str) -> bool {
    ALLOWED.iter().any(|(k, _)| *k == key)
}

/// Every disagreement between Ward and the contract `c`, one line each.
///
/// Messages and enums are compared by name, and also where a field of one
/// refers to a type under another name (a nested type Ward declares at
/// another level, or a v2beta1 field holding v2's type): the wire carries no
/// type names, so such a pair must agree field by field.
fn mismatches(c: &Value) -> Vec<String> {
    let w = Ward::load();
    let mut out = Vec::new();
    let messages = c["messages"].as_object().expect("messages");
    let enums = c["enums"].as_object().expect("enums");
    let mut pairs: Vec<(String, String)> = w
        .messages
        .keys()
        .filter(|n| messages.contains_key(n.as_str()))
        .map(|n| (n.clone(), n.clone()))
        .collect();
    let mut enum_pairs: BTreeSet<(String, String)> = w
        .enums
        .keys()
        .filter(|n| enums.contains_key(n.as_str()))
        .map(|n| (n.clone(), n.clone()))
        .collect();
    let services = c["services"].as_object().expect("services");
    for (name, methods) in &w.services {
        let Some(cs) = services.get(name) else { continue };
        for (method, (input, output)) in methods {
            let key = format!("{name}.{method}");
            let Some(cm) = cs["methods"].get(method) else {
                if !allowed(&key) {
                    out.push(format!("{key}: not in the contract"));
                }
                continue;
            };
            for (ours, theirs) in [(input, &cm["input"]), (output, &cm["output"])] {
                let theirs = theirs.as_str().unwrap_or_default().to_owned();
                if theirs.starts_with(".google.protobuf.") {
                    if *ours != theirs {
                        out.push(format!("{key}: {ours} (contract {theirs})"));
                    }
                } else {
                    pairs.push((ours.clone(), theirs));
                }
            }
        }
    }
    let mut seen = BTreeSet::new();
    while let Some((ours, theirs)) = pairs.pop() {
        if !seen.insert((ours.clone(), theirs.clone())) {
            continue;
        }
        let Some(m) = w.messages.get(&ours) else {
            out.push(format!("{ours}: Ward has no such message (contract {theirs})"));
            continue;
        };
        let Some(cm) = messages.get(&theirs) else {
            out.push(format!("{ours}: the contract has no {theirs}"));
            continue;
        };
        let shown = if ours == theirs {
            ours.clone()
        } else {
            format!("{ours} (as {theirs})")
        };
        let by_name: BTreeMap<&str, &Value> = cm["fields"]
            .as_array()
            .expect("fields")
            .iter()
            .map(|f| (f["name"].as_str().unwrap_or_default(), f))
            .collect();
        for f in &m.field {
            let key = format!("{ours}.{}", f.name());
            let Some(cf) = by_name.get(f.name()) else {
                let request_side = theirs.ends_with("Request") || theirs.ends_with("Filter");
                let extension = request_side && f.number() >= 100;
                if !(extension || allowed(&key)) {
                    out.push(format!("{shown}.{} = {}: not in the contract", f.name(), f.number()));
                }
                continue;
            };
            let label = if f.label() == Label::Repeated {
                "repeated"
            } else {
                "optional"
            };
            let ty = type_name(f.r#type());
            let mut diffs = Vec::new();
            if cf["number"].as_i64() != Some(i64::from(f.number())) {
                diffs.push(format!("number {} (contract {})", f.number(), cf["number"]));
            }
            if cf["type"].as_str() != Some(ty) {
                diffs.push(format!("type {ty} (contract {})", cf["type"]));
            } else if matches!(f.r#type(), Type::Message | Type::Enum) {
                let theirs_t = cf["type_name"].as_str().unwrap_or_default().to_owned();
                let ours_t = f.type_name().to_owned();
                if theirs_t.starts_with(".google.protobuf.") {
                    if ours_t != theirs_t {
                        diffs.push(format!("type {ours_t} (contract {theirs_t})"));
                    }
                } else if f.r#type() == Type::Enum {
                    enum_pairs.insert((ours_t, theirs_t));
                } else {
                    pairs.push((ours_t, theirs_t));
                }
            }
            if cf["label"].as_str() != Some(label) {
                diffs.push(format!("label {label} (contract {})", cf["label"]));
            }
            if cf["json"].as_str() != Some(f.json_name()) {
                diffs.push(format!("json {} (contract {})", f.json_name(), cf["json"]));
            }
            if !diffs.is_empty() && !allowed(&key) {
                out.push(format!("{shown}.{}: {}", f.name(), diffs.join(", ")));
            }
        }
    }
    for (ours, theirs) in &enum_pairs {
        let (Some(e), Some(ce)) = (w.enums.get(ours), enums.get(theirs)) else {
            out.push(format!("{ours}: no enum {theirs} to compare with"));
            continue;
        };
        let shown = if ours == theirs {
            ours.clone()
        } else {
            format!("{ours} (as {theirs})")
        };
        for v in &e.value {
            let key = format!("{ours}.{}", v.name());
            match ce.get(v.name()).and_then(Value::as_i64) {
                Some(n) if n == i64::from(v.number()) => {}
                Some(n) if !allowed(&key) => {
                    out.push(format!("{shown}.{} = {}: the contract says {n}", v.name(), v.number()))
                }
                None if !allowed(&key) => {
                    out.push(format!("{shown}.{} = {}: not in the contract", v.name(), v.number()))
                }
                _ => {}
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn wards_descriptors_agree_with_the_wire_contract() {
    let bad = mismatches(&contract());
    assert!(
        bad.is_empty(),
        "{} disagreements with shared/spec/wire-contract.json:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// The check can fail: a field number changed in a copy of the contract is
/// found, and so is an enum number.
#[test]
fn a_changed_number_is_found() {
    let mut c = contract();
    let fields = c["messages"][".chainguard.platform.iam.v2.Group"]["fields"]
        .as_array_mut()
        .expect("Group is in the contract");
    let f = fields.iter_mut().find(|f| f["name"] == "uid").expect("uid");
    f["number"] = Value::from(99);
    c["enums"][".chainguard.capabilities.Capability"]["CAP_IAM_GROUPS_LIST"] = Value::from(7);
    let bad = mismatches(&c);
    assert!(
        bad.iter()
            .any(|l| l.starts_with(".chainguard.platform.iam.v2.Group.uid: number 1 (contract 99)")),
        "{bad:#?}"
    );
    assert!(
        bad.iter()
            .any(|l| l.starts_with(".chainguard.capabilities.Capability.CAP_IAM_GROUPS_LIST")),
        "{bad:#?}"
    );
}
