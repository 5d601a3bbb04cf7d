//! Ward's protocol types: prost messages, tonic services and proto3-JSON serde
//! impls, all generated from the `.proto` files under `proto/`.
//!
//! One type system serves REST (via the pbjson serde impls), gRPC and the CLI.
//! Generated code is never edited by hand.

pub mod descriptors;
mod timestamp;

pub use timestamp::Timestamp;

// Generated code: lints are the generator's business, not ours.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod chainguard {
    pub mod capabilities {
        include!(concat!(env!("OUT_DIR"), "/chainguard.capabilities.rs"));
        include!(concat!(env!("OUT_DIR"), "/chainguard.capabilities.serde.rs"));
    }
    pub mod platform {
        pub mod common {
            include!(concat!(env!("OUT_DIR"), "/chainguard.platform.common.rs"));
            include!(concat!(env!("OUT_DIR"), "/chainguard.platform.common.serde.rs"));
        }
        pub mod iam {
            // v1 (package `chainguard.platform.iam`): the package has no version suffix, so its types
            // live at this level beside the `v2` modules.
            include!(concat!(env!("OUT_DIR"), "/chainguard.platform.iam.rs"));
            include!(concat!(env!("OUT_DIR"), "/chainguard.platform.iam.serde.rs"));
            pub mod v2 {
                include!(concat!(env!("OUT_DIR"), "/chainguard.platform.iam.v2.rs"));
                include!(concat!(env!("OUT_DIR"), "/chainguard.platform.iam.v2.serde.rs"));
            }
            /// The beta services; their messages are the v2 types.
            pub mod v2beta1 {
                include!(concat!(env!("OUT_DIR"), "/chainguard.platform.iam.v2beta1.rs"));
            }
        }
        pub mod registry {
            // v1 (package `chainguard.platform.registry`): the package has no version suffix, so its types
            // live at this level beside the `v2` modules.
            include!(concat!(env!("OUT_DIR"), "/chainguard.platform.registry.rs"));
            include!(concat!(env!("OUT_DIR"), "/chainguard.platform.registry.serde.rs"));
            pub mod v2 {
                include!(concat!(env!("OUT_DIR"), "/chainguard.platform.registry.v2.rs"));
                include!(concat!(env!("OUT_DIR"), "/chainguard.platform.registry.v2.serde.rs"));
            }
            /// The beta services; their messages are the v2 types.
            pub mod v2beta1 {
                include!(concat!(env!("OUT_DIR"), "/chainguard.platform.registry.v2beta1.rs"));
            }
        }
        pub mod vulnerabilities {
            pub mod v2 {
                include!(concat!(env!("OUT_DIR"), "/chainguard.platform.vulnerabilities.v2.rs"));
                include!(concat!(
                    env!("OUT_DIR"),
                    "/chainguard.platform.vulnerabilities.v2.serde.rs"
                ));
            }
            /// The beta services; their messages are the v2 types.
            pub mod v2beta1 {
                include!(concat!(
                    env!("OUT_DIR"),
                    "/chainguard.platform.vulnerabilities.v2beta1.rs"
                ));
            }
            /// The write service (v1 shapes).
            pub mod v1 {
                include!(concat!(env!("OUT_DIR"), "/chainguard.platform.vulnerabilities.v1.rs"));
                include!(concat!(
                    env!("OUT_DIR"),
                    "/chainguard.platform.vulnerabilities.v1.serde.rs"
                ));
            }
        }
        /// Registration (joining a group with an invite code) and who-am-I
        /// (package `chainguard.platform.auth`, no version suffix).
        pub mod auth {
            include!(concat!(env!("OUT_DIR"), "/chainguard.platform.auth.rs"));
            include!(concat!(env!("OUT_DIR"), "/chainguard.platform.auth.serde.rs"));
        }
        /// Liveness, without authentication.
        pub mod ping {
            // v1 (package `chainguard.platform.ping`): the package has no version suffix, so its types
            // live at this level beside the `v2` modules.
            include!(concat!(env!("OUT_DIR"), "/chainguard.platform.ping.rs"));
            include!(concat!(env!("OUT_DIR"), "/chainguard.platform.ping.serde.rs"));
            pub mod v2 {
                include!(concat!(env!("OUT_DIR"), "/chainguard.platform.ping.v2.rs"));
                include!(concat!(env!("OUT_DIR"), "/chainguard.platform.ping.v2.serde.rs"));
            }
            /// The beta service; its messages are the v2 types.
            pub mod v2beta1 {
                include!(concat!(env!("OUT_DIR"), "/chainguard.platform.ping.v2beta1.rs"));
            }
        }
        /// The public advisory feed.
        pub mod advisory {
            // v1 (package `chainguard.platform.advisory`): the package has no version suffix, so its types
            // live at this level beside the `v2` modules.
            include!(concat!(env!("OUT_DIR"), "/chainguard.platform.advisory.rs"));
            include!(concat!(env!("OUT_DIR"), "/chainguard.platform.advisory.serde.rs"));
            pub mod v2 {
                include!(concat!(env!("OUT_DIR"), "/chainguard.platform.advisory.v2.rs"));
                include!(concat!(env!("OUT_DIR"), "/chainguard.platform.advisory.v2.serde.rs"));
            }
            /// The beta service; its messages are the v2 types.
            pub mod v2beta1 {
                include!(concat!(env!("OUT_DIR"), "/chainguard.platform.advisory.v2beta1.rs"));
            }
        }
        /// Event subscriptions (v1 package `chainguard.platform.events`, no
        /// version suffix, with Ward's event log), v2 and v2beta1.
        pub mod events {
            include!(concat!(env!("OUT_DIR"), "/chainguard.platform.events.rs"));
            include!(concat!(env!("OUT_DIR"), "/chainguard.platform.events.serde.rs"));
            pub mod v2 {
                include!(concat!(env!("OUT_DIR"), "/chainguard.platform.events.v2.rs"));
                include!(concat!(env!("OUT_DIR"), "/chainguard.platform.events.v2.serde.rs"));
            }
            /// The beta service; its messages are the v2 types.
            pub mod v2beta1 {
                include!(concat!(env!("OUT_DIR"), "/chainguard.platform.events.v2beta1.rs"));
            }
        }
        /// An image's vulnerability report and SBOM (package `chainguard.platform.tenant`).
        pub mod tenant {
            include!(concat!(env!("OUT_DIR"), "/chainguard.platform.tenant.rs"));
            include!(concat!(env!("OUT_DIR"), "/chainguard.platform.tenant.serde.rs"));
        }
        /// The token exchange (package `chainguard.platform.oidc`).
        pub mod oidc {
            include!(concat!(env!("OUT_DIR"), "/chainguard.platform.oidc.rs"));
            include!(concat!(env!("OUT_DIR"), "/chainguard.platform.oidc.serde.rs"));
        }
    }
}

pub use chainguard::capabilities;
pub use chainguard::platform::{advisory, auth, common, events, iam, oidc, ping, registry, tenant, vulnerabilities};

/// The encoded `FileDescriptorSet` of every served package, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptor.bin"));
