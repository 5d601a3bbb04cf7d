//! The v1 REST bindings: tables of [`super::transcode::Rpc`], one per domain.

use super::transcode::Rpc;

mod events;
mod iam;
mod people;
mod registry;

/// Every v1 binding Ward serves through the transcoder.
pub fn rpcs() -> Vec<Rpc> {
    let mut all = iam::rpcs();
    all.extend(people::rpcs());
    all.extend(registry::rpcs());
    all.extend(events::rpcs());
    all
}
