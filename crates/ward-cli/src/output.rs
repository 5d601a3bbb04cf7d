//! Tables, text and JSON, and keeping what the server sent from steering the
//! terminal.
//!
//! Everything the CLI prints for people goes through [`sanitize`]: table cells
//! ([`table`]), lines of text ([`line`]) and errors ([`sanitize_error`]).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::IsTerminal as _;

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ColumnConstraint, ContentArrangement, Table, Width};
use serde::Serialize;

/// Prints `v` as pretty JSON.
///
/// Deliberately not passed through [`sanitize`]. serde_json escapes C0
/// control characters (ESC becomes `\u001b`, newline `\n`), so no escape
/// sequence reaches the terminal; it writes DEL, C1, bidi and zero-width
/// characters as they are. JSON output is for programs, which decode the
/// strings and must get exactly the server's data back: rewriting them here
/// would corrupt it. People reading `-o json` in a terminal can meet those
/// characters raw; the table output is the one meant for them.
pub fn json<T: Serialize>(v: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// Whether `c` must not reach the terminal as is: control characters (C0,
/// including tab and newline, DEL and C1), bidi embeddings, overrides, isolates
/// and marks, zero-width characters, and the line and paragraph separators.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'
                | '\u{2066}'..='\u{2069}'
                | '\u{feff}'
        )
}

/// `s` with every character that could move the cursor, recolour or clear the
/// terminal, reorder the text around it or hide in it (see [`unsafe_char`])
/// replaced by a visible Rust-style escape, e.g. ESC becomes `\u{1b}`.
///
/// The one place the CLI makes server data (names, descriptions, issuers,
/// subjects, error messages…) safe to print; borrowed when nothing changes.
pub fn sanitize(s: &str) -> Cow<'_, str> {
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if unsafe_char(c) {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `e` with every message in its chain [`sanitize`]d; `e` itself when none
/// needs it. Errors carry the server's messages and echo its data.
pub fn sanitize_error(e: anyhow::Error) -> anyhow::Error {
    let messages: Vec<String> = e.chain().map(ToString::to_string).collect();
    if !messages.iter().any(|m| m.chars().any(unsafe_char)) {
        return e;
    }
    let mut messages = messages.into_iter().rev().map(|m| sanitize(&m).into_owned());
    let root = anyhow::Error::msg(messages.next().unwrap_or_default());
    messages.fold(root, |err, m| err.context(m))
}

/// Prints one line of text, [`sanitize`]d.
pub fn line(s: &str) {
    println!("{}", sanitize(s));
}

/// Width used when stdout is a terminal whose size cannot be found.
const FALLBACK_WIDTH: u16 = 80;

/// Prints a table whose cells are [`sanitize`]d, fitted to [`table_width`].
pub fn table(header: &[&str], rows: Vec<Vec<String>>) {
    println!("{}", render_table(header, rows, table_width()));
}

/// The table, its cells [`sanitize`]d, at most `width` characters wide when
/// given, unbounded otherwise. Cells wrap at spaces, so `a, b, c` lists break
/// after a comma; see [`keep_words_whole`] for when a word is split.
fn render_table(header: &[&str], rows: Vec<Vec<String>>, width: Option<u16>) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| sanitize(c).into_owned()).collect())
        .collect();
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        // The width is decided by `table_width` alone.
        .force_no_tty()
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.to_vec());
    if let Some(w) = width {
        t.set_width(w);
        keep_words_whole(&mut t, header, &rows, w);
    }
    for r in rows {
        t.add_row(r);
    }
    t.to_string()
}

/// The width every column keeps (or its longest word, when shorter) while
/// others are widened to keep their words whole.
const MIN_COLUMN: usize = 12;

/// Widens columns to their longest word, since comfy-table splits mid-word
/// only words longer than their column: first the columns that wrap at spaces
/// (some cell has several words, like a capability list or a description),
/// then those of single words (uids, names), each narrowest first, while the
/// table still fits `width` with every other column at least [`MIN_COLUMN`]
/// wide (or its longest word, when shorter). The first wrapping column that
/// cannot have that gets what is left; the rest share whatever remains.
fn keep_words_whole(t: &mut Table, header: &[&str], rows: &[Vec<String>], width: u16) {
    let cells = |i: usize| rows.iter().filter_map(move |r| r.get(i).map(String::as_str));
    let longest: Vec<usize> = (0..header.len())
        .map(|i| {
            std::iter::once(header[i])
                .chain(cells(i))
                .flat_map(|cell| cell.split(' '))
                .map(|word| word.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let (mut wrapping, mut single): (Vec<usize>, Vec<usize>) =
        (0..header.len()).partition(|&i| cells(i).any(|c| c.trim().contains(' ')));
    wrapping.sort_by_key(|&i| longest[i]);
    single.sort_by_key(|&i| longest[i]);
    // What is left after borders (one more than the columns) and a space of
    // padding either side of each column, and what the other columns keep.
    let mut budget = usize::from(width).saturating_sub(header.len() + 1 + 2 * header.len());
    let mut reserved: usize = longest.iter().map(|&w| w.min(MIN_COLUMN)).sum();
    // A column's content at least `w` wide (the constraint counts the padding).
    let mut bound = |i: usize, w: usize| {
        if let Some(column) = t.column_mut(i) {
            let w = u16::try_from(w)
                .unwrap_or(u16::MAX)
                .saturating_add(column.padding_width());
            column.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(w)));
        }
    };
    let order = wrapping
        .iter()
        .map(|&i| (i, true))
        .chain(single.iter().map(|&i| (i, false)));
    for (i, wraps) in order {
        let others = reserved - longest[i].min(MIN_COLUMN);
        if longest[i] + others <= budget {
            bound(i, longest[i]);
            budget -= longest[i];
            reserved = others;
            continue;
        }
        let rest = budget.saturating_sub(others);
        if wraps && rest > MIN_COLUMN {
            bound(i, rest);
        }
        break;
    }
}

/// How wide tables may be: `COLUMNS` when it is a positive number (so scripts
/// and tests can force a width), else the terminal's width when stdout is a
/// terminal, else unbounded: piped output keeps each row on one line, nothing
/// is cut off.
fn table_width() -> Option<u16> {
    let columns = std::env::var("COLUMNS").ok();
    choose_width(columns.as_deref(), || {
        // comfy-table's own lookup (crossterm): the size of the terminal on stdout.
        std::io::stdout()
            .is_terminal()
            .then(|| Table::new().width().unwrap_or(FALLBACK_WIDTH))
    })
}

/// [`table_width`] given `COLUMNS` and the terminal's width (`None`: stdout is
/// not a terminal).
fn choose_width(columns: Option<&str>, terminal: impl FnOnce() -> Option<u16>) -> Option<u16> {
    match columns.and_then(|c| c.trim().parse::<u16>().ok()) {
        Some(w) if w > 0 => Some(w),
        _ => terminal(),
    }
}

/// A timestamp as the API writes it (RFC 3339), or "" when absent.
pub fn time(t: Option<&ward_proto::Timestamp>) -> String {
    t.and_then(|t| serde_json::to_value(t).ok())
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_leaves_ordinary_text_alone() {
        for s in ["", "acme", "the team's group, 2nd", "héllo wörld ✓ 日本語", "a\\u{1b}b"] {
            assert!(matches!(sanitize(s), Cow::Borrowed(b) if b == s), "{s:?}");
        }
    }

    #[test]
    fn sanitize_escapes_control_characters() {
        assert_eq!(sanitize("\x1b[31mred\x1b[0m"), "\\u{1b}[31mred\\u{1b}[0m");
        assert_eq!(sanitize("a\nb\tc\rd\0e"), "a\\u{a}b\\u{9}c\\u{d}d\\u{0}e");
        assert_eq!(sanitize("\x07bell\x7f"), "\\u{7}bell\\u{7f}");
        // C1, e.g. the 8-bit CSI and OSC.
        assert_eq!(sanitize("\u{9b}2J\u{9d}0;t\u{85}"), "\\u{9b}2J\\u{9d}0;t\\u{85}");
    }

    #[test]
    fn sanitize_escapes_bidi_and_zero_width_characters() {
        let cases = [
            ("\u{202a}", "\\u{202a}"),
            ("\u{202b}", "\\u{202b}"),
            ("\u{202c}", "\\u{202c}"),
            ("\u{202d}", "\\u{202d}"),
            ("\u{202e}", "\\u{202e}"),
            ("\u{2066}", "\\u{2066}"),
            ("\u{2067}", "\\u{2067}"),
            ("\u{2068}", "\\u{2068}"),
            ("\u{2069}", "\\u{2069}"),
            ("\u{200e}", "\\u{200e}"),
            ("\u{200f}", "\\u{200f}"),
            ("\u{061c}", "\\u{61c}"),
            ("\u{200b}", "\\u{200b}"),
            ("\u{200c}", "\\u{200c}"),
            ("\u{200d}", "\\u{200d}"),
            ("\u{2060}", "\\u{2060}"),
            ("\u{feff}", "\\u{feff}"),
            ("\u{2028}", "\\u{2028}"),
            ("\u{2029}", "\\u{2029}"),
        ];
        for (raw, escaped) in cases {
            assert_eq!(sanitize(&format!("x{raw}y")), format!("x{escaped}y"), "{raw:?}");
        }
        // A "trojan source" name reads differently once escaped.
        assert_eq!(sanitize("admin\u{202e}nimda"), "admin\\u{202e}nimda");
        // Neighbours of the ranges are ordinary characters.
        for s in ["\u{2027}", "\u{202f}", "\u{2065}", "\u{206a}", "\u{a0}", "\u{fefe}"] {
            assert_eq!(sanitize(s), s, "{s:?}");
        }
    }

    #[test]
    fn sanitize_error_escapes_every_message_in_the_chain() {
        let e = anyhow::anyhow!("no group named \x1b]0;pwned\x07 (HTTP 404)").context("--parent \u{202e}x");
        let e = sanitize_error(e);
        assert_eq!(
            format!("{e:#}"),
            "--parent \\u{202e}x: no group named \\u{1b}]0;pwned\\u{7} (HTTP 404)"
        );
        assert_eq!(e.chain().count(), 2);

        let clean = anyhow::anyhow!("not found (HTTP 404)").context("describe");
        assert_eq!(format!("{:#}", sanitize_error(clean)), "describe: not found (HTTP 404)");
    }

    #[test]
    fn table_cells_are_sanitized() {
        let out = render_table(&["NAME"], vec![vec!["\x1b[2Jevil\u{202e}".into()]], Some(80));
        assert!(!out.contains('\x1b') && !out.contains('\u{202e}'), "{out}");
        assert!(out.contains("\\u{1b}[2Jevil\\u{202e}"), "{out}");
    }

    /// The header and rows `ward iam roles list --builtin` prints.
    fn role_table() -> (&'static [&'static str], Vec<Vec<String>>) {
        use crate::resource::Resource as _;
        use ward_core::capability::BUILTIN_ROLES;
        use ward_proto::iam::v2::Role;

        let rows = BUILTIN_ROLES
            .iter()
            .map(|r| {
                Role {
                    uid: r.uid(),
                    name: r.name.into(),
                    description: r.description.into(),
                    capabilities: r.capabilities.iter().map(|&c| c as i32).collect(),
                    ..Default::default()
                }
                .row()
            })
            .collect();
        (Role::HEADER, rows)
    }

    /// The lines of the table's last column (the capabilities), trimmed.
    fn last_column(table: &str) -> Vec<&str> {
        table
            .lines()
            .filter(|l| l.starts_with('│'))
            .filter_map(|l| l.trim_end_matches('│').rsplit('┆').next())
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect()
    }

    #[test]
    fn table_fits_the_given_width() {
        let (header, rows) = role_table();
        let unbounded = render_table(header, rows.clone(), None);
        assert!(unbounded.lines().any(|l| l.chars().count() > 200), "{unbounded}");
        for width in [60u16, 80, 100, 120, 132, 200] {
            let out = render_table(header, rows.clone(), Some(width));
            for l in out.lines() {
                assert!(
                    l.chars().count() <= usize::from(width),
                    "a line of {} chars at width {width}:\n{out}",
                    l.chars().count()
                );
            }
            // Nothing is cut off: as many capabilities as went in.
            let commas = |s: &str| s.matches(',').count();
            let listed: usize = rows.iter().map(|r| commas(&r[3])).sum();
            assert_eq!(
                last_column(&out).into_iter().map(commas).sum::<usize>(),
                listed,
                "{out}"
            );
        }
    }

    /// Every capability name that fits in the column is printed whole, never
    /// split across lines; from 100 columns on, that is every name.
    #[test]
    fn capability_lists_wrap_after_commas() {
        use ward_core::capability::Capability;

        let (header, rows) = role_table();
        for width in [80u16, 100, 120, 132] {
            let out = render_table(header, rows.clone(), Some(width));
            let lines = last_column(&out);
            let column = lines.iter().map(|l| l.chars().count()).max().unwrap_or(0);
            let whole: std::collections::HashSet<&str> = lines
                .iter()
                .flat_map(|l| l.split(' '))
                .map(|w| w.trim_end_matches(','))
                .filter(|w| Capability::from_name(w).is_some())
                .collect();
            let mut listed = 0;
            for name in rows.iter().flat_map(|r| r[3].split(", ")) {
                listed += 1;
                if name.len() < column || width >= 100 {
                    assert!(whole.contains(name), "{name} is split at width {width}:\n{out}");
                }
            }
            assert!(listed > rows.len() && whole.len() > 100, "{out}");
        }
    }

    #[test]
    fn width_comes_from_columns_then_the_terminal() {
        assert_eq!(choose_width(Some("80"), || Some(200)), Some(80));
        assert_eq!(choose_width(Some(" 132 "), || None), Some(132));
        assert_eq!(choose_width(None, || Some(200)), Some(200));
        // Unset or unusable COLUMNS: the terminal, or unbounded when there is none.
        assert_eq!(choose_width(None, || None), None);
        for bad in ["", "0", "-5", "wide", "99999999"] {
            assert_eq!(choose_width(Some(bad), || None), None, "{bad:?}");
            assert_eq!(choose_width(Some(bad), || Some(90)), Some(90), "{bad:?}");
        }
    }
}
