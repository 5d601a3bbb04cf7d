//! Injectable time, so tests can move the clock (token expiry, page-token age).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_millis(&self) -> i64;

    fn now_secs(&self) -> i64 {
        self.now_millis().div_euclid(1000)
    }
}

/// The real clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_millis(&self) -> i64 {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
    }
}

/// The real clock plus an adjustable offset: time still moves, and tests can jump it.
#[derive(Clone, Debug, Default)]
pub struct OffsetClock {
    offset_ms: Arc<AtomicI64>,
}

impl OffsetClock {
    pub fn advance_millis(&self, ms: i64) {
        self.offset_ms.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for OffsetClock {
    fn now_millis(&self) -> i64 {
        SystemClock.now_millis() + self.offset_ms.load(Ordering::SeqCst)
    }
}
