//! Ward's domain core: the rules every transport and backend share, with no I/O.
//!
//! Types here parse rather than validate: a [`uidp::Uidp`], a [`listing::OrderBy`]
//! or a [`fieldmask::FieldMask`] can only exist in a valid state, so the service
//! layer and the stores never re-check them.

pub mod advisory;
pub mod apk;
pub mod capability;
pub mod clock;
pub mod error;
pub mod fieldmask;
pub mod listing;
pub mod names;
pub mod osv_range;
pub mod pagetoken;
pub mod pattern;
pub mod registry;
pub mod rpc;
pub mod severity;
pub mod traceparent;
pub mod uidp;
pub mod versions;

pub use error::{Error, Result};
