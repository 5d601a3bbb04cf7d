//! Generates Rust types, tonic services and proto3-JSON (serde) impls from `proto/`.
//!
//! The v2beta1 packages are byte-identical to v2 except for their package name,
//! so they are derived here from the v2 files instead of being kept twice. Their
//! messages map onto the v2 Rust types (protobuf wire encoding carries no package
//! names), so only the v2beta1 *services* are generated separately and one service
//! layer serves both versions.

use std::path::{Path, PathBuf};

/// Packages written once as v2 and also served as v2beta1.
const VERSIONED: &[&str] = &["iam", "registry", "vulnerabilities", "ping", "advisory", "events"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    println!("cargo:rerun-if-changed={}", root.display());

    let mut protos = Vec::new();
    collect(&root, &mut protos)?;

    // Derive the v2beta1 tree into OUT_DIR/proto.
    let beta_root = out.join("proto");
    for domain in VERSIONED {
        let src = root.join("chainguard/platform").join(domain).join("v2");
        let dst = beta_root.join("chainguard/platform").join(domain).join("v2beta1");
        std::fs::create_dir_all(&dst)?;
        for entry in std::fs::read_dir(&src)? {
            let path = entry?.path();
            let text = std::fs::read_to_string(&path)?;
            let from = format!("chainguard.platform.{domain}.v2");
            let to = format!("chainguard.platform.{domain}.v2beta1");
            let beta = text
                .replace(&format!("package {from};"), &format!("package {to};"))
                .replace(&format!("{from}."), &format!("{to}."))
                .replace(
                    &format!("chainguard/platform/{domain}/v2/"),
                    &format!("chainguard/platform/{domain}/v2beta1/"),
                );
            let target = dst.join(path.file_name().ok_or("file name")?);
            std::fs::write(&target, beta)?;
            protos.push(target);
        }
    }

    let descriptor = out.join("descriptor.bin");
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    config.extern_path(".google.protobuf.Timestamp", "crate::Timestamp");
    config.extern_path(".google.protobuf.FieldMask", "::pbjson_types::FieldMask");
    config.extern_path(".google.protobuf.Duration", "::pbjson_types::Duration");
    for domain in VERSIONED {
        config.extern_path(
            format!(".chainguard.platform.{domain}.v2beta1"),
            format!("crate::chainguard::platform::{domain}::v2"),
        );
    }
    let includes = [root.clone(), beta_root, protoc_bin_vendored::include_path()?];
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .file_descriptor_set_path(&descriptor)
        .compile_with_config(config, &protos, &includes)?;

    let set = std::fs::read(&descriptor)?;
    pbjson_build::Builder::new()
        .register_descriptors(&set)?
        .extern_path(".google.protobuf.Timestamp", "crate::Timestamp")
        .emit_fields()
        .ignore_unknown_fields()
        .build(&[
            ".chainguard.capabilities",
            ".chainguard.platform.common",
            ".chainguard.platform.iam.v2",
            ".chainguard.platform.registry.v2",
            ".chainguard.platform.vulnerabilities.v2",
            ".chainguard.platform.vulnerabilities.v1",
            ".chainguard.platform.advisory.v2",
            ".chainguard.platform.auth",
            ".chainguard.platform.ping.v2",
            ".chainguard.platform.oidc",
            // The v1 packages (no version suffix; the prefix also matches
            // their v2 siblings, which are generated once all the same).
            ".chainguard.platform.iam",
            ".chainguard.platform.registry",
            ".chainguard.platform.advisory",
            ".chainguard.platform.tenant",
            ".chainguard.platform.ping",
            ".chainguard.platform.events",
        ])?;
    Ok(())
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "proto") {
            out.push(path);
        }
    }
    Ok(())
}
