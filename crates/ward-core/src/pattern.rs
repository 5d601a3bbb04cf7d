//! Claim patterns: regular expressions written by API callers and matched
//! against upstream token claims on every token exchange.
//!
//! A pattern matches a value only as a whole. The anchors are added to the
//! parsed syntax tree (`\A (?:P) \z`), never by wrapping the text, so no
//! pattern can close the wrapper's group and escape it (`a)|(?:.*`).
//! Compilation is bounded in input length, nesting and compiled size, and
//! matching is linear in the value (RE2 semantics: no backtracking blow-up).

use regex_automata::meta;
use regex_syntax::hir::{Hir, Look};

/// Longest accepted pattern, in bytes.
pub const MAX_PATTERN_LEN: usize = 1024;
/// Deepest accepted nesting of groups and repetitions.
const NEST_LIMIT: u32 = 32;
/// Largest compiled automaton a pattern may produce.
const NFA_SIZE_LIMIT: usize = 256 * 1024;
/// Lazy-DFA cache per search thread; beyond it the search falls back to a
/// slower engine that is still linear.
const HYBRID_CACHE_BYTES: usize = 64 * 1024;

/// A compiled, anchored pattern.
#[derive(Clone, Debug)]
pub struct Pattern(meta::Regex);

impl Pattern {
    /// Checks that `pattern` parses, without compiling it: linear in its
    /// length, so every pattern of a request can be checked cheaply before
    /// any is compiled.
    pub fn check_syntax(pattern: &str) -> Result<(), String> {
        Self::parse(pattern).map(|_| ())
    }

    fn parse(pattern: &str) -> Result<Hir, String> {
        if pattern.len() > MAX_PATTERN_LEN {
            return Err(format!("must be at most {MAX_PATTERN_LEN} bytes"));
        }
        regex_syntax::ParserBuilder::new()
            .nest_limit(NEST_LIMIT)
            .build()
            .parse(pattern)
            .map_err(|e| {
                let e = e.to_string();
                format!(
                    "is not a valid regular expression: {}",
                    e.lines().last().unwrap_or("").trim_start_matches("error: ")
                )
            })
    }

    /// Compiles `pattern` anchored at both ends. The error says why, in a
    /// sentence that can follow the field name.
    pub fn compile(pattern: &str) -> Result<Self, String> {
        let hir = Self::parse(pattern)?;
        let anchored = Hir::concat(vec![Hir::look(Look::Start), hir, Hir::look(Look::End)]);
        let config = meta::Config::new()
            .nfa_size_limit(Some(NFA_SIZE_LIMIT))
            .onepass_size_limit(Some(NFA_SIZE_LIMIT))
            .dfa_size_limit(Some(NFA_SIZE_LIMIT))
            .hybrid_cache_capacity(HYBRID_CACHE_BYTES);
        meta::Builder::new()
            .configure(config)
            .build_from_hir(&anchored)
            .map(Pattern)
            .map_err(|_| "is too large once compiled; simplify it".to_owned())
    }

    /// Whether the whole of `value` matches.
    pub fn is_match(&self, value: &str) -> bool {
        self.0.is_match(value)
    }

    /// Heap bytes held by the compiled pattern (for weighing caches).
    pub fn memory_usage(&self) -> usize {
        self.0.memory_usage()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn anchored_at_both_ends() {
        let p = Pattern::compile("repo:acme/.*").unwrap();
        assert!(p.is_match("repo:acme/app"));
        assert!(!p.is_match("xrepo:acme/app"));
        let p = Pattern::compile("a|ab").unwrap();
        assert!(p.is_match("ab") && p.is_match("a") && !p.is_match("abc"));
        let p = Pattern::compile("^foo$").unwrap();
        assert!(p.is_match("foo") && !p.is_match("foox"));
    }

    #[test]
    fn a_pattern_cannot_escape_its_anchors() {
        // Text wrapping would turn these into `^(?:repo:acme/app)|(?:.*)$`.
        assert!(Pattern::compile("repo:acme/app)|(?:.*").is_err());
        assert!(Pattern::compile("a)|(b").is_err());
        // Verbose-mode comments cannot swallow an anchor either.
        let p = Pattern::compile("(?x) repo:acme/app # comment").unwrap();
        assert!(p.is_match("repo:acme/app") && !p.is_match("repo:acme/app-and-more"));
        let p = Pattern::compile("(?m)repo$").unwrap();
        assert!(!p.is_match("repo\nmore"));
    }

    #[test]
    fn bounded() {
        assert!(Pattern::compile("(unclosed").is_err());
        assert!(Pattern::compile(&"a".repeat(MAX_PATTERN_LEN + 1)).is_err());
        assert!(Pattern::compile(&format!("{}a{}", "(".repeat(40), ")".repeat(40))).is_err());
        assert!(Pattern::compile(r"\w{1000}\w{1000}").is_err());
        assert!(Pattern::compile("((a{100}){100}){100}").is_err());
    }

    proptest! {
        /// Arbitrary text compiles or is refused; it never panics. An escaped
        /// literal matches exactly itself: never a prefix, suffix or extension.
        #[test]
        fn compile_never_panics(p in ".{0,200}", v in ".{0,40}") {
            if let Ok(re) = Pattern::compile(&p) {
                let _ = re.is_match(&v);
            }
            let lit = Pattern::compile(&regex::escape(&v)).unwrap();
            prop_assert!(lit.is_match(&v));
            let extended = format!("{v}x");
            let prefixed = format!("x{v}");
            prop_assert!(!lit.is_match(&extended));
            prop_assert!(!lit.is_match(&prefixed));
        }

        /// Regex metacharacter soup from a small alphabet, where escapes are likely.
        #[test]
        fn metachar_soup(p in "[()|*+?{}\\[\\]^$\\\\a.,0-9:-]{0,64}") {
            if let Ok(re) = Pattern::compile(&p) {
                let _ = re.is_match("aaaa:aaaa");
            }
        }
    }
}
