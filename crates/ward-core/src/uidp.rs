//! UIDPs: hierarchical identifiers (`<40 hex>(/<16 hex>)*`).
//!
//! A child's UIDP is its parent's plus one segment, so hierarchy questions are
//! string questions: the ancestors of X are its prefixes, and the descendants of
//! P are the keys in `[P + "/", P + "0")` (since `'/' + 1 == '0'`).

use std::fmt;

use rand::RngCore;

use crate::error::Error;

/// Most segments a UIDP may have (the root and 31 below it). No real hierarchy
/// comes near it; the bound keeps every walk over a UIDP's ancestors small.
pub const MAX_DEPTH: usize = 32;
/// The longest UIDP: a root and [`MAX_DEPTH`] - 1 segments.
pub const MAX_LEN: usize = 40 + (MAX_DEPTH - 1) * 17;

/// Per-parent counters for [`Uidp::new_child_ordered`].
mod ordered {
    use std::collections::HashMap;
    use std::sync::{Mutex, PoisonError};

    /// A parent's counter is forgotten once it has not been used for this
    /// long (then it restarts at a random value); a clock that steps back
    /// further than this could repeat a uid, which the store refuses.
    const KEEP_MS: u64 = 60_000;

    struct Counters {
        /// Parent uid → (last used, in ms; next value).
        by_parent: HashMap<String, (u64, u16)>,
        /// Size at which unused counters are dropped next.
        prune_at: usize,
    }

    static COUNTERS: Mutex<Option<Counters>> = Mutex::new(None);

    /// The next counter value of `parent`.
    pub fn next(parent: &str, now_ms: u64) -> u16 {
        let mut guard = COUNTERS.lock().unwrap_or_else(PoisonError::into_inner);
        let c = guard.get_or_insert_with(|| Counters {
            by_parent: HashMap::new(),
            prune_at: 1024,
        });
        if c.by_parent.len() >= c.prune_at {
            c.by_parent
                .retain(|_, (used, _)| now_ms.saturating_sub(*used) < KEEP_MS);
            // Amortized: the next prune waits until the map has doubled.
            c.prune_at = (c.by_parent.len() * 2).max(1024);
        }
        let entry = c
            .by_parent
            .entry(parent.to_owned())
            .or_insert_with(|| (now_ms, rand::random()));
        let n = entry.1;
        entry.0 = entry.0.max(now_ms);
        entry.1 = n.wrapping_add(1);
        n
    }
}

/// A syntactically valid UIDP.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Uidp(String);

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Uidp {
    /// Parses a UIDP, naming `field` in the error when it is malformed.
    pub fn parse(field: &str, s: &str) -> Result<Self, Error> {
        if Self::is_valid(s) {
            Ok(Self(s.to_owned()))
        } else {
            Err(Error::invalid(
                field,
                format!(
                    "{field} must be a UIDP (^[0-9a-f]{{40}}(?:/[0-9a-f]{{16}})*$) of at most {MAX_DEPTH} segments"
                ),
            ))
        }
    }

    /// Whether `s` matches `^[0-9a-f]{40}(?:/[0-9a-f]{16})*$` with at most
    /// [`MAX_DEPTH`] segments. The length is checked first, so a huge input
    /// costs nothing.
    pub fn is_valid(s: &str) -> bool {
        if s.len() > MAX_LEN {
            return false;
        }
        let mut parts = s.split('/');
        parts.next().is_some_and(|root| is_hex(root, 40)) && parts.all(|p| is_hex(p, 16))
    }

    /// A new random root UIDP (20 random bytes).
    pub fn new_root() -> Self {
        let mut b = [0u8; 20];
        rand::thread_rng().fill_bytes(&mut b);
        Self(hex::encode(b))
    }

    /// A new random child of `self` (8 random bytes).
    pub fn new_child(&self) -> Self {
        let mut b = [0u8; 8];
        rand::thread_rng().fill_bytes(&mut b);
        Self(format!("{}/{}", self.0, hex::encode(b)))
    }

    /// A child whose segment is the time (48 bits of milliseconds) and a
    /// counter of this parent's (16 bits, from a random start), so children
    /// made together sort together: a bulk write then fills neighbouring
    /// index pages instead of touching one random page per index per row.
    /// Unique within a process for 65,536 children of one parent per
    /// millisecond; a clash across replicas (same millisecond, same counter)
    /// is refused by the store's primary key, never silently merged. The
    /// counter is the parent's own, so the gaps between a tenant's uids count
    /// only its own writes, never another tenant's.
    pub fn new_child_ordered(&self, now_ms: i64) -> Self {
        let ms = (now_ms.max(0) as u64) & 0xFFFF_FFFF_FFFF;
        let n = u64::from(ordered::next(&self.0, ms));
        Self(format!("{}/{:016x}", self.0, (ms << 16) | n))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The parent, or `None` for a root.
    pub fn parent(&self) -> Option<Self> {
        self.0.rfind('/').map(|i| Self(self.0[..i].to_owned()))
    }

    pub fn is_root(&self) -> bool {
        !self.0.contains('/')
    }

    /// Strict ancestors, nearest last (root first).
    pub fn ancestors(&self) -> Vec<Self> {
        self.ancestor_strs().map(|s| Self(s.to_owned())).collect()
    }

    /// Strict ancestors as borrowed prefixes of `self`, root first: a walk
    /// over them copies nothing.
    pub fn ancestor_strs(&self) -> impl Iterator<Item = &str> {
        self.0.match_indices('/').map(|(i, _)| &self.0[..i])
    }

    /// `self` and its ancestors as borrowed prefixes, root first.
    pub fn self_and_ancestor_strs(&self) -> impl Iterator<Item = &str> {
        self.ancestor_strs().chain(std::iter::once(self.0.as_str()))
    }

    /// The number of segments (1 for a root).
    pub fn depth(&self) -> usize {
        self.0.bytes().filter(|b| *b == b'/').count() + 1
    }

    /// Whether the UIDP text `uid` is `scope` or lies below it.
    pub fn is_within(uid: &str, scope: &str) -> bool {
        uid.strip_prefix(scope)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }

    /// The root (organization) segment.
    pub fn root(&self) -> &str {
        self.0.split('/').next().unwrap_or(&self.0)
    }

    /// `self` and its ancestors: the scopes at which a binding can cover `self`.
    pub fn self_and_ancestors(&self) -> Vec<Self> {
        let mut v = self.ancestors();
        v.push(self.clone());
        v
    }

    /// Whether `self` is `other` or lies below it.
    pub fn is_self_or_descendant_of(&self, other: &Uidp) -> bool {
        self.0 == other.0 || (self.0.starts_with(&other.0) && self.0.as_bytes()[other.0.len()] == b'/')
    }

    /// The half-open key range holding exactly the strict descendants of `self`.
    pub fn descendant_range(&self) -> (String, String) {
        (format!("{}/", self.0), format!("{}0", self.0))
    }
}

impl fmt::Display for Uidp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Uidp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Uidp({})", self.0)
    }
}

impl From<Uidp> for String {
    fn from(u: Uidp) -> String {
        u.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn shapes() {
        let root = Uidp::new_root();
        assert_eq!(root.as_str().len(), 40);
        assert!(root.is_root());
        let child = root.new_child();
        assert_eq!(child.as_str().len(), 57);
        assert_eq!(child.parent(), Some(root.clone()));
        assert_eq!(child.ancestors(), vec![root.clone()]);
        assert!(child.is_self_or_descendant_of(&root));
        assert!(!root.is_self_or_descendant_of(&child));
        assert!(Uidp::parse("uid", "ABC").is_err());
        assert!(Uidp::parse("uid", &format!("{}/", root)).is_err());
        assert!(Uidp::parse("uid", &format!("{}/0123456789abcdeF", root)).is_err());
    }

    #[test]
    fn ordered_children_are_valid_distinct_and_sort_by_time() {
        let root = Uidp::new_root();
        let mut seen = std::collections::HashSet::new();
        let mut last = String::new();
        // Many in one millisecond: distinct, and (counter wrap aside) increasing.
        for i in 0..10_000 {
            let c = root.new_child_ordered(1_700_000_000_000);
            assert!(Uidp::is_valid(c.as_str()), "{c}");
            assert_eq!(c.parent(), Some(root.clone()));
            assert!(seen.insert(c.as_str().to_owned()), "duplicate {c} at {i}");
            last = c.as_str().to_owned();
        }
        // A later millisecond sorts after every one of them.
        let later = root.new_child_ordered(1_700_000_000_001);
        assert!(seen.iter().all(|u| u.as_str() < later.as_str()), "{later} vs {last}");
        // Negative or huge clocks still give valid uids.
        assert!(Uidp::is_valid(root.new_child_ordered(-5).as_str()));
        assert!(Uidp::is_valid(root.new_child_ordered(i64::MAX).as_str()));
    }

    /// The counter in an ordered uid's last segment.
    fn counter(u: &Uidp) -> u16 {
        let seg = u.as_str().rsplit('/').next().unwrap();
        (u64::from_str_radix(seg, 16).unwrap() & 0xFFFF) as u16
    }

    #[test]
    fn ordered_counters_are_per_parent() {
        // Another tenant's writes between two of mine leave no gap in mine.
        let (mine, theirs) = (Uidp::new_root(), Uidp::new_root());
        let mut t = 1_700_000_000_000;
        let mut prev = counter(&mine.new_child_ordered(t));
        for round in 0..50 {
            for _ in 0..round {
                theirs.new_child_ordered(t);
            }
            t += round % 3;
            let next = counter(&mine.new_child_ordered(t));
            assert_eq!(next, prev.wrapping_add(1), "round {round}");
            prev = next;
        }
    }

    #[test]
    fn depth_and_length_are_bounded() {
        let mut u = Uidp::new_root();
        for _ in 1..MAX_DEPTH {
            u = u.new_child();
        }
        assert_eq!(u.as_str().len(), MAX_LEN);
        assert!(Uidp::parse("uid", u.as_str()).is_ok());
        assert_eq!(u.depth(), MAX_DEPTH);
        assert_eq!(u.self_and_ancestor_strs().count(), MAX_DEPTH);
        assert!(Uidp::parse("uid", u.new_child().as_str()).is_err());
        let huge = format!("{}{}", "a".repeat(40), "/0123456789abcdef".repeat(20_000));
        assert!(!Uidp::is_valid(&huge));
    }

    proptest! {
        /// Arbitrary input never panics, and what parses is within the bounds.
        #[test]
        fn parse_never_panics(s in ".{0,700}") {
            if let Ok(u) = Uidp::parse("uid", &s) {
                prop_assert!(u.depth() <= MAX_DEPTH && u.as_str().len() <= MAX_LEN);
                prop_assert_eq!(u.ancestors().len() + 1, u.depth());
            }
        }

        /// Hex-shaped input near the bounds is decided by shape and depth alone.
        #[test]
        fn parse_accepts_exactly_the_grammar(depth in 1usize..40, bad_seg in proptest::option::of(0usize..40)) {
            let mut s = "0123456789abcdef0123456789abcdef01234567".to_owned();
            for i in 1..depth {
                s.push('/');
                s.push_str(if bad_seg == Some(i) { "0123456789abcdeg" } else { "0123456789abcdef" });
            }
            let want = depth <= MAX_DEPTH && bad_seg.is_none_or(|b| b == 0 || b >= depth);
            prop_assert_eq!(Uidp::is_valid(&s), want);
        }

        /// The descendant key range holds exactly the strict descendants.
        #[test]
        fn descendant_range_is_exact(depth_a in 0usize..3, depth_b in 0usize..3, same_root: bool) {
            let r1 = Uidp::new_root();
            let r2 = if same_root { r1.clone() } else { Uidp::new_root() };
            let mut a = r1; for _ in 0..depth_a { a = a.new_child(); }
            let mut b = r2; for _ in 0..depth_b { b = b.new_child(); }
            let (lo, hi) = a.descendant_range();
            let in_range = b.as_str() >= lo.as_str() && b.as_str() < hi.as_str();
            prop_assert_eq!(in_range, b != a && b.is_self_or_descendant_of(&a));
        }
    }
}
