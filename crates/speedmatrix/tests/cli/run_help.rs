//! `speedmatrix run --help` as a newcomer reads it: the flags grouped under five headings, and
//! every flag's default shown, whether clap applies it or the settings do later (an `Option` whose
//! default is written into its help).

use crate::common::bin;

/// The headings, in the order the help shows them.
const HEADINGS: [&str; 5] = ["What to measure", "Load phases", "Server", "Output", "Advanced"];

/// Flags that take a value and have no default by nature: leaving one out leaves its feature off
/// (or, for `--url`, measures the built-in engine, as its help says).
const NO_DEFAULT: [&str; 19] = [
    "--url",
    "--server-cmd",
    "--api-key",
    "--prefill-contexts",
    "--tokenizer",
    "--tools",
    "--label",
    "--cost-per-hour",
    "--precision",
    "--resume",
    "--prompts",
    "--request-rate",
    "--mixed-prefill",
    "--sessions",
    "--replay",
    "--model-config",
    "--active-params",
    "--bytes-per-weight",
    "--kv-bytes-per-token",
];

/// One flag of the help: its long name, whether it takes a value, its heading and its whole text.
struct Entry {
    flag: String,
    takes_value: bool,
    heading: String,
    text: String,
}

/// A flag's first line: `  -q, --quiet …` or `      --contexts <CONTEXTS> …`; help text that runs
/// on to further lines is indented deeper.
fn flag_line(line: &str) -> Option<(String, bool)> {
    let indent = line.len() - line.trim_start().len();
    let rest = line.trim_start();
    let rest = match rest.as_bytes() {
        [b'-', c, b',', b' ', ..] if c.is_ascii_alphabetic() => &rest[4..],
        _ => rest,
    };
    if !(2..=6).contains(&indent) || !rest.starts_with("--") {
        return None;
    }
    let end = rest.find(|c: char| c.is_whitespace() || c == '=').unwrap_or(rest.len());
    Some((rest[..end].to_string(), rest[end..].trim_start_matches('=').trim_start().starts_with('<')))
}

fn entries(help: &str) -> (Vec<String>, Vec<Entry>) {
    let mut headings = Vec::new();
    let mut out: Vec<Entry> = Vec::new();
    for line in help.lines() {
        if !line.starts_with(' ') && line.trim_end().ends_with(':') {
            headings.push(line.trim_end().trim_end_matches(':').to_string());
        } else if let Some((flag, takes_value)) = flag_line(line) {
            let heading = headings.last().cloned().unwrap_or_default();
            out.push(Entry { flag, takes_value, heading, text: line.trim().to_string() });
        } else if let Some(e) = out.last_mut().filter(|_| line.starts_with(' ')) {
            e.text.push(' ');
            e.text.push_str(line.trim());
        }
    }
    (headings, out)
}

#[test]
fn run_help_groups_the_flags_under_five_headings_and_shows_every_default() {
    let out = bin().args(["run", "--help"]).env_remove("OPENAI_API_KEY").output().expect("run speedmatrix");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let help = String::from_utf8(out.stdout).unwrap();
    let (headings, flags) = entries(&help);

    // the five headings, in order; any other is clap's own (usage, the help flag)
    let shown: Vec<&str> = headings.iter().map(String::as_str).filter(|h| HEADINGS.contains(h)).collect();
    assert_eq!(shown, HEADINGS, "headings {headings:?} in:\n{help}");
    assert!(flags.len() > 60, "{} flags found in:\n{help}", flags.len());
    for e in &flags {
        assert!(
            HEADINGS.contains(&e.heading.as_str()) || e.flag == "--help",
            "{} is under `{}`, not one of {HEADINGS:?}",
            e.flag,
            e.heading
        );
    }
    let under = |heading: &str, flag: &str| flags.iter().any(|e| e.flag == flag && e.heading == heading);
    for (heading, flag) in [
        ("What to measure", "--concurrency"),
        ("Load phases", "--request-rate"),
        ("Load phases", "--turns"),
        ("Load phases", "--time-scale"),
        ("Server", "--url"),
        ("Server", "--model-config"),
        ("Output", "--resume"),
        ("Advanced", "--stall-timeout"),
        ("Advanced", "--rank-wait"),
    ] {
        assert!(under(heading, flag), "{flag} is not under {heading}:\n{help}");
    }

    // every flag with a value shows its default, or has none by nature (and then says none)
    let missing: Vec<&str> = flags
        .iter()
        .filter(|e| e.takes_value && !e.text.contains("[default: ") && !NO_DEFAULT.contains(&e.flag.as_str()))
        .map(|e| e.flag.as_str())
        .collect();
    assert!(missing.is_empty(), "no [default: …] in the help of {missing:?}:\n{help}");
    for flag in NO_DEFAULT {
        let e = flags.iter().find(|e| e.flag == flag).unwrap_or_else(|| panic!("{flag} is not in:\n{help}"));
        assert!(e.takes_value && !e.text.contains("[default: "), "{flag} is listed as having no default: {}", e.text);
    }
    // the defaults the settings apply, spelled as they resolve
    for (flag, default) in [
        ("--duration", "[default: 30s; 5s in the demo]"),
        ("--max-tokens", "[default: 4096]"),
        ("--stall-timeout", "[default: 15s]"),
        ("--serve-timeout", "[default: 15m]"),
        ("--min-duration", "[default: 5s]"),
        ("--drain-max", "[default: 10m]"),
        ("--seed", "[default: 17]"),
        ("--progress", "[default: auto]"),
    ] {
        let e = flags.iter().find(|e| e.flag == flag).unwrap_or_else(|| panic!("{flag} is not in:\n{help}"));
        assert!(e.text.contains(default), "{flag}: {}", e.text);
    }
}
