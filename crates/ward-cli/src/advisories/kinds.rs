//! The vocabularies of advisories: event types, false-positive types and
//! review states, by their advisory-schema names (the CLI's flag values),
//! their proto JSON names and the words the CLI prints.

use serde_json::Value;

/// An event type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EventKind {
    Detection,
    #[value(alias = "true-positive-determination")]
    TruePositive,
    #[value(alias = "false-positive-determination")]
    FalsePositive,
    Fixed,
    PendingUpstreamFix,
    FixNotPlanned,
    AnalysisNotPlanned,
    Patched,
}

impl EventKind {
    pub const ALL: [EventKind; 8] = [
        Self::Detection,
        Self::TruePositive,
        Self::FalsePositive,
        Self::Fixed,
        Self::PendingUpstreamFix,
        Self::FixNotPlanned,
        Self::AnalysisNotPlanned,
        Self::Patched,
    ];

    /// The advisory-schema `type`, e.g. `true-positive-determination`.
    pub fn schema_name(self) -> &'static str {
        match self {
            Self::Detection => "detection",
            Self::TruePositive => "true-positive-determination",
            Self::FalsePositive => "false-positive-determination",
            Self::Fixed => "fixed",
            Self::PendingUpstreamFix => "pending-upstream-fix",
            Self::FixNotPlanned => "fix-not-planned",
            Self::AnalysisNotPlanned => "analysis-not-planned",
            Self::Patched => "patched",
        }
    }

    /// The event's oneof member in proto JSON (v1 and v2 alike).
    pub fn json_key(self) -> &'static str {
        match self {
            Self::Detection => "detection",
            Self::TruePositive => "truePositiveDetermination",
            Self::FalsePositive => "falsePositiveDetermination",
            Self::Fixed => "fixed",
            Self::PendingUpstreamFix => "pendingUpstreamFix",
            Self::FixNotPlanned => "fixNotPlanned",
            Self::AnalysisNotPlanned => "analysisNotPlanned",
            Self::Patched => "patched",
        }
    }

    /// The v2 `EventTypeFilter` name, e.g. `EVENT_TYPE_FILTER_FIXED`.
    pub fn filter_name(self) -> String {
        format!(
            "EVENT_TYPE_FILTER_{}",
            self.schema_name().replace('-', "_").to_uppercase()
        )
    }

    /// The status an advisory has when this is its latest approved event.
    pub fn status_word(self) -> &'static str {
        match self {
            Self::Detection => "under investigation",
            Self::TruePositive => "affected",
            Self::FalsePositive => "not affected",
            Self::Fixed => "fixed",
            Self::PendingUpstreamFix => "pending upstream fix",
            Self::FixNotPlanned => "fix not planned",
            Self::AnalysisNotPlanned => "analysis not planned",
            Self::Patched => "patched",
        }
    }

    /// The type an advisory-schema document names (it has no `patched`).
    pub fn from_schema(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|k| *k != Self::Patched && k.schema_name() == name)
    }
}

/// Why a finding is a false positive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FpType {
    VulnerabilityRecordAnalysisContested,
    ComponentVulnerabilityMismatch,
    VulnerableCodeVersionNotUsed,
    VulnerableCodeNotIncludedInPackage,
    VulnerableCodeNotInExecutionPath,
    VulnerableCodeCannotBeControlledByAdversary,
    InlineMitigationsExist,
}

impl FpType {
    /// In enum-number order (1–7).
    pub const ALL: [FpType; 7] = [
        Self::VulnerabilityRecordAnalysisContested,
        Self::ComponentVulnerabilityMismatch,
        Self::VulnerableCodeVersionNotUsed,
        Self::VulnerableCodeNotIncludedInPackage,
        Self::VulnerableCodeNotInExecutionPath,
        Self::VulnerableCodeCannotBeControlledByAdversary,
        Self::InlineMitigationsExist,
    ];

    /// The advisory-schema name, e.g. `vulnerable-code-not-in-execution-path`.
    pub fn schema_name(self) -> &'static str {
        match self {
            Self::VulnerabilityRecordAnalysisContested => "vulnerability-record-analysis-contested",
            Self::ComponentVulnerabilityMismatch => "component-vulnerability-mismatch",
            Self::VulnerableCodeVersionNotUsed => "vulnerable-code-version-not-used",
            Self::VulnerableCodeNotIncludedInPackage => "vulnerable-code-not-included-in-package",
            Self::VulnerableCodeNotInExecutionPath => "vulnerable-code-not-in-execution-path",
            Self::VulnerableCodeCannotBeControlledByAdversary => "vulnerable-code-cannot-be-controlled-by-adversary",
            Self::InlineMitigationsExist => "inline-mitigations-exist",
        }
    }

    /// The v1 enum name: the same words in upper snake case, no prefix.
    pub fn v1_name(self) -> String {
        self.schema_name().replace('-', "_").to_uppercase()
    }

    pub fn from_schema(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.schema_name() == name)
    }
}

/// A false-positive type as the server sent it (v2 `TYPE_…`, v1 bare, or a
/// number), in advisory-schema words; "" when unspecified.
pub fn fp_words(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => {
            let s = s.strip_prefix("TYPE_").unwrap_or(s);
            if s == "UNSPECIFIED" {
                String::new()
            } else {
                s.to_lowercase().replace('_', "-")
            }
        }
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .and_then(|n| n.checked_sub(1))
            .and_then(|i| FpType::ALL.get(i))
            .map_or_else(String::new, |t| t.schema_name().to_owned()),
        _ => String::new(),
    }
}

/// A review state to filter by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReviewFilter {
    Pending,
    Approved,
    RequestChanges,
    Rejected,
}

impl ReviewFilter {
    /// The v2 `ReviewState` name.
    pub fn v2_name(self) -> &'static str {
        match self {
            Self::Pending => "REVIEW_STATE_PENDING",
            Self::Approved => "REVIEW_STATE_APPROVED",
            Self::RequestChanges => "REVIEW_STATE_REQUEST_CHANGES",
            Self::Rejected => "REVIEW_STATE_REJECTED",
        }
    }
}

/// A review state as the server sent it (v2 `REVIEW_STATE_…`, v1 bare, or a
/// number) in words: "pending", "approved", "request changes", "rejected";
/// "" when unknown or unspecified.
pub fn review_words(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => {
            let s = s.strip_prefix("REVIEW_STATE_").unwrap_or(s);
            match s {
                "UNSPECIFIED" | "UNKNOWN" => String::new(),
                other => other.to_lowercase().replace('_', " "),
            }
        }
        Some(Value::Number(n)) => match n.as_i64() {
            Some(1) => "pending".into(),
            Some(2) => "approved".into(),
            Some(3) => "request changes".into(),
            Some(4) => "rejected".into(),
            _ => String::new(),
        },
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum as _;
    use serde_json::json;

    #[test]
    fn names_line_up() {
        for k in EventKind::ALL {
            // The flag value is the schema name or its short form.
            let flag = k.to_possible_value().map(|p| p.get_name().to_owned());
            assert!(flag.is_some_and(|f| k.schema_name().starts_with(&f)), "{k:?}");
        }
        assert_eq!(
            EventKind::TruePositive.filter_name(),
            "EVENT_TYPE_FILTER_TRUE_POSITIVE_DETERMINATION"
        );
        assert_eq!(
            EventKind::from_schema("fix-not-planned"),
            Some(EventKind::FixNotPlanned)
        );
        assert_eq!(EventKind::from_schema("patched"), None);
        for t in FpType::ALL {
            assert_eq!(
                t.to_possible_value().map(|p| p.get_name().to_owned()).as_deref(),
                Some(t.schema_name())
            );
            assert_eq!(FpType::from_schema(t.schema_name()), Some(t));
        }
        assert_eq!(FpType::InlineMitigationsExist.v1_name(), "INLINE_MITIGATIONS_EXIST");
    }

    #[test]
    fn words_from_either_api() {
        assert_eq!(
            fp_words(Some(&json!("TYPE_INLINE_MITIGATIONS_EXIST"))),
            "inline-mitigations-exist"
        );
        assert_eq!(
            fp_words(Some(&json!("COMPONENT_VULNERABILITY_MISMATCH"))),
            "component-vulnerability-mismatch"
        );
        assert_eq!(fp_words(Some(&json!(5))), "vulnerable-code-not-in-execution-path");
        assert_eq!(fp_words(Some(&json!("TYPE_UNSPECIFIED"))), "");
        assert_eq!(
            review_words(Some(&json!("REVIEW_STATE_REQUEST_CHANGES"))),
            "request changes"
        );
        assert_eq!(review_words(Some(&json!("APPROVED"))), "approved");
        assert_eq!(review_words(Some(&json!(4))), "rejected");
        assert_eq!(review_words(None), "");
    }
}
