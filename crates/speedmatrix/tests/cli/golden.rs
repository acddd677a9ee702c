//! Golden files: what speedmatrix writes stays what it wrote before a restructuring (issue 30),
//! byte for byte, the HTML page element for element and word for word. The files under
//! `tests/data/golden/` were written by the commit before the change; a change that means to alter
//! an output rewrites them on purpose (see `bless` below) and says so in its commit.
//!
//! * The reports: `speedmatrix report` of fixed records (a run with every phase and telemetry,
//!   the sample run, a 1.1 capacity run, the two reference-tool files): the Markdown, every CSV
//!   and what it prints, byte for byte; the HTML page as a browser reads it ([`html_tokens`]):
//!   the same elements with the same attributes and the same text, whatever the escaping style
//!   (`'` or `&#39;`) and the whitespace between tags (the page is written by a template engine).
//! * The record: `import` writes each fixed record (a run.json speedmatrix wrote among them) as
//!   before, every field, its order and when it is left out.
//! * A run: its `settings` section byte for byte, its top-level keys, and its `--progress plain`
//!   lines with their numbers masked (a run's figures are measured, so only their places can be
//!   golden).
//!
//! `SPEEDMATRIX_BLESS=1` writes the files instead of comparing; `SPEEDMATRIX_GOLDEN_BIN=PATH`
//! runs another build of speedmatrix (the commit before a change, to take its files).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::{QUICK, SimSpec, result, sim};

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/golden")
}

fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data").join(rel)
}

fn speedmatrix() -> Command {
    match std::env::var_os("SPEEDMATRIX_GOLDEN_BIN") {
        Some(p) => Command::new(p),
        None => Command::new(env!("CARGO_BIN_EXE_speedmatrix")),
    }
}

fn blessing() -> bool {
    std::env::var_os("SPEEDMATRIX_BLESS").is_some_and(|v| v == "1")
}

/// Compares `got` with the golden file `rel` (or writes it when blessing); returns a line that
/// says what differs, for one failure that lists them all.
fn check(rel: &str, got: &str) -> Option<String> {
    let path = golden_dir().join(rel);
    if blessing() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, got).unwrap();
        return None;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if want == got {
        return None;
    }
    if rel.ends_with(".html") {
        return html_differs(rel, &want, got);
    }
    let line = want
        .lines()
        .zip(got.lines())
        .position(|(a, b)| a != b)
        .unwrap_or(want.lines().count().min(got.lines().count()));
    Some(format!(
        "{rel}: differs from line {}:\n  golden: {:?}\n  now:    {:?}",
        line + 1,
        want.lines().nth(line).unwrap_or("<end>"),
        got.lines().nth(line).unwrap_or("<end>")
    ))
}

/// Where the pages `want` and `got` differ as [`html_tokens`] read them, if they do.
fn html_differs(rel: &str, want: &str, got: &str) -> Option<String> {
    let (want, got) = (html_tokens(want), html_tokens(got));
    let at = want.iter().zip(&got).position(|(a, b)| a != b).unwrap_or(want.len().min(got.len()));
    if want.len() == got.len() && at == want.len() {
        return None;
    }
    let around = |tokens: &[String]| tokens[at.saturating_sub(2)..(at + 3).min(tokens.len())].join("\n    ");
    Some(format!(
        "{rel}: differs from token {}:\n  golden:\n    {}\n  now:\n    {}",
        at + 1,
        around(&want),
        around(&got)
    ))
}

/// A page as the tokens a browser reads: `<name k="v" …>` per start tag (attributes in their
/// order, values decoded), `</name>` per end tag (`<line/>` is `<line>` and `</line>`, as in the
/// SVG it stands in), a quoted token per text (references decoded, whitespace runs as one space,
/// text of whitespace alone left out) and the stylesheet's text trimmed. The page is the report's
/// own markup, so a hand reader of tags and text is enough: no comments, no unquoted attributes.
fn html_tokens(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = html;
    while !rest.is_empty() {
        if let Some(decl) = rest.strip_prefix("<!") {
            let end = decl.find('>').unwrap_or(decl.len());
            out.push(format!("<!{}>", squash(&decl[..end])));
            rest = decl.get(end + 1..).unwrap_or("");
        } else if let Some(tag) = rest.strip_prefix("</") {
            let end = tag.find('>').unwrap_or(tag.len());
            out.push(format!("</{}>", tag[..end].trim()));
            rest = tag.get(end + 1..).unwrap_or("");
        } else if rest.starts_with('<') && rest[1..].starts_with(|c: char| c.is_ascii_alphabetic()) {
            let (name, start, self_closing, after) = start_tag(&rest[1..]);
            out.push(start);
            rest = after;
            if self_closing {
                out.push(format!("</{name}>"));
            } else if name == "style" {
                let end = rest.find("</style>").unwrap_or(rest.len());
                out.push(format!("{:?}", squash(&rest[..end]).trim()));
                rest = &rest[end..];
            }
        } else {
            let first = rest.chars().next().map_or(1, char::len_utf8);
            let end = rest[first..].find('<').map_or(rest.len(), |i| i + first);
            let text = squash(&decode(&rest[..end]));
            if !text.trim().is_empty() {
                out.push(format!("{text:?}"));
            }
            rest = &rest[end..];
        }
    }
    out
}

/// A start tag from just after its `<`: its name, its token, whether it closes itself (`/>`) and
/// what follows its `>`.
fn start_tag(s: &str) -> (String, String, bool, &str) {
    let name_end = s.find(|c: char| c.is_whitespace() || c == '>' || c == '/').unwrap_or(s.len());
    let name = s[..name_end].to_string();
    let mut token = format!("<{name}");
    let mut rest = &s[name_end..];
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("/>") {
            return (name, token + ">", true, after);
        }
        if let Some(after) = rest.strip_prefix('>') {
            return (name, token + ">", false, after);
        }
        if rest.is_empty() {
            return (name, token + ">", false, rest);
        }
        let key_end = rest.find(|c: char| c.is_whitespace() || c == '=' || c == '>' || c == '/').unwrap_or(rest.len());
        token.push(' ');
        token.push_str(&rest[..key_end]);
        rest = &rest[key_end..];
        if let Some(quoted) = rest.strip_prefix("=\"") {
            let close = quoted.find('"').unwrap_or(quoted.len());
            token.push_str(&format!("={:?}", decode(&quoted[..close])));
            rest = quoted.get(close + 1..).unwrap_or("");
        } else if key_end == 0 {
            // not an attribute (a stray `/`): step over it
            rest = &rest[rest.chars().next().map_or(0, char::len_utf8)..];
        }
    }
}

/// `&amp;`, `&lt;`, `&gt;`, `&quot;`, `&#39;` and other numeric references decoded; any other `&`
/// kept as it is.
fn decode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let end = rest.find(';').filter(|&e| e <= 10);
        let decoded = end.and_then(|e| match &rest[1..e] {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            n if n.starts_with("#x") || n.starts_with("#X") => char::from_u32(u32::from_str_radix(&n[2..], 16).ok()?),
            n if n.starts_with('#') => char::from_u32(n[1..].parse().ok()?),
            _ => None,
        });
        match (decoded, end) {
            (Some(c), Some(e)) => {
                out.push(c);
                rest = &rest[e + 1..];
            }
            _ => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out + rest
}

/// Runs of whitespace as one space, kept at the ends (a lost space between words shows).
fn squash(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if !c.is_whitespace() {
            out.push(c);
        } else if !out.ends_with(' ') {
            out.push(' ');
        }
    }
    out
}

#[test]
fn pages_compare_by_what_a_browser_reads() {
    let old = "<!DOCTYPE html>\n<p class=\"a\" title=\"x &#39;y&#39; &amp; &quot;z&quot;\">it&#39;s\n  <b>two</b></p>\n\
               <svg><line x1=\"1\"/></svg>";
    let new = "<!DOCTYPE html><p class=\"a\" title=\"x 'y' &amp; &quot;z&quot;\">it's <b>two</b></p>\
               <svg><line x1=\"1\"></line></svg>";
    assert_eq!(html_differs("a.html", old, new), None);
    for changed in [
        new.replace("it's", "its"),
        new.replace("class=\"a\"", "class=\"b\""),
        new.replace("x1=", "x2="),
        new.replace("<b>two</b>", "<i>two</i>"),
        new.replace("'y'", "&lt;y&gt;"),
        new.replace(" <b>", "<b>"),
    ] {
        assert!(html_differs("a.html", old, &changed).is_some(), "{changed}");
    }
}

/// The fixed records whose reports are golden, by the name of their golden folder.
fn records() -> Vec<(&'static str, PathBuf)> {
    vec![
        ("every-phase", golden_dir().join("every-phase.run.json")),
        ("sample", data("run-sample.json")),
        ("capacity-1.1", data("run-capacity-1.1.json")),
        ("lil", data("reference/ling-3.0-flash-int4-2xh200nvl.lil-bench-result.json")),
        ("bench", data("reference/llm-inference-bench-0.4.18.vllm-cpu-tiny.json")),
    ]
}

#[test]
fn every_report_of_the_fixed_records_is_as_before() {
    let mut diffs = Vec::new();
    for (name, record) in records() {
        let dir = tempfile::tempdir().unwrap();
        let out = speedmatrix()
            .arg("report")
            .arg(&record)
            .args(["--html", "report.html", "--md", "report.md", "--csv", "measurements.csv"])
            .current_dir(dir.path())
            .env("COLUMNS", "100")
            .output()
            .unwrap();
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let mut files: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
        files.sort();
        // what it printed, with the temporary folder's path taken out
        let printed = String::from_utf8_lossy(&out.stdout).replace(&dir.path().display().to_string(), "DIR");
        diffs.extend(check(&format!("{name}/printed.txt"), &printed));
        diffs.extend(check(&format!("{name}/files.txt"), &(files.join("\n") + "\n")));
        for f in &files {
            let text = std::fs::read_to_string(dir.path().join(f)).unwrap();
            diffs.extend(check(&format!("{name}/{f}"), &text));
        }
        // the record as `import` writes it: every field, its order and when it is left out
        let out = speedmatrix().arg("import").arg(&record).args(["--out", "imported"]).current_dir(dir.path()).output();
        let out = out.unwrap();
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let text = std::fs::read_to_string(dir.path().join("imported/run.json")).unwrap();
        diffs.extend(check(&format!("{name}/imported.run.json"), &text));
    }
    assert!(diffs.is_empty(), "the reports changed:\n{}", diffs.join("\n"));
}

/// Every key path of `v` with the kind of its value; an array's objects are merged into one `[]`.
fn shape(v: &Value, at: &str, out: &mut BTreeMap<String, String>) {
    let kind = match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let entry = out.entry(at.to_string()).or_default();
    if !entry.split('|').any(|k| k == kind) {
        let mut kinds: Vec<&str> = entry.split('|').filter(|k| !k.is_empty()).chain([kind]).collect();
        kinds.sort_unstable();
        *entry = kinds.join("|");
    }
    match v {
        // a list of words or numbers (warnings, a cell's contexts) is one kind whatever its length
        Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => {}
        Value::Array(items) => items.iter().for_each(|i| shape(i, &format!("{at}[]"), out)),
        Value::Object(map) => map.iter().for_each(|(k, i)| shape(i, &format!("{at}.{k}"), out)),
        _ => {}
    }
}

/// A `--progress plain` line without its time stamp, with every number masked as `#` and runs of
/// spaces as one (columns line up to the numbers' widths); repeated lines (live samples) are kept
/// once, and warnings left out: whether the client was busy depends on the machine, not the code.
fn masked(progress: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    for line in progress.lines().take_while(|l| !l.is_empty()) {
        let text = line.split_once("s] ").map_or(line, |(_, t)| t);
        if text.trim_start().starts_with("warning:") {
            continue;
        }
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut m = String::new();
        let mut in_number = false;
        for ch in text.chars() {
            let digit = ch.is_ascii_digit() || (in_number && matches!(ch, '.' | ','));
            if digit && !in_number {
                m.push('#');
            } else if !digit {
                m.push(ch);
            }
            in_number = digit;
        }
        if out.last() != Some(&m) {
            out.push(m);
        }
    }
    out.join("\n") + "\n"
}

/// One short run of the matrix and every load phase on the simulated engine, its figures left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_writes_the_golden_settings_record_shape_and_progress() {
    let sim = sim(SimSpec::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let url = sim.handle.url();
    let mut args: Vec<&str> = vec!["run", "--url", url.as_str(), "--contexts", "1k", "--concurrency", "1,2"];
    args.extend_from_slice(QUICK);
    args.extend_from_slice(&["--duration", "1s", "--max-tokens", "64", "--progress", "plain", "--label", "golden"]);
    args.extend_from_slice(&["--matrix", "--request-rate", "20", "--requests", "4", "--burst", "--sessions", "1"]);
    args.extend_from_slice(&["--turns", "2", "--think-time", "100ms", "--turn-tokens", "16"]);
    args.extend_from_slice(&[
        "--mixed-prefill",
        "2k@2",
        "--mixed-prefill-probes",
        "1",
        "--mixed-prefill-window",
        "500ms",
    ]);
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let out_dir = dir.path().to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        speedmatrix().args(&args).arg("--out").arg(&out_dir).env_remove("OPENAI_API_KEY").output().unwrap()
    })
    .await
    .unwrap();
    sim.handle.shutdown().await;
    let r = result(dir.path(), output);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let record = r.record();
    let mut diffs = Vec::new();
    let settings = serde_json::to_string_pretty(&record["settings"]).unwrap() + "\n";
    diffs.extend(check("run/settings.json", &settings.replace(url.as_str(), "URL")));
    // which optional fields a live run writes depends on what it measured (a warning, a
    // failure): the shape checked here is of what every run writes, its sections' keys
    let mut keys = BTreeMap::new();
    shape(record, "", &mut keys);
    let keys: String =
        keys.iter().filter(|(k, _)| k.matches('.').count() == 1).map(|(k, v)| format!("{k} {v}\n")).collect();
    diffs.extend(check("run/shape.txt", &keys));
    let progress = masked(&r.stdout.replace(url.as_str(), "URL").replace(&dir.path().display().to_string(), "DIR"));
    diffs.extend(check("run/progress.txt", &progress));
    assert!(diffs.is_empty(), "the run's output changed:\n{}", diffs.join("\n"));
}

/// The golden record: taken once from a run like the one above (`SPEEDMATRIX_BLESS=1` with
/// `SPEEDMATRIX_GOLDEN_RECORD=1` writes it again from the build under test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_golden_record_is_present_and_a_current_record() {
    let path = golden_dir().join("every-phase.run.json");
    if std::env::var_os("SPEEDMATRIX_GOLDEN_RECORD").is_some_and(|v| v == "1") {
        write_golden_record(&path).await;
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: Value = serde_json::from_str(&text).unwrap();
    for phase in ["rate", "burst", "mixed_prefill", "sessions"] {
        assert!(v["phases"][phase].is_object(), "the golden record has every phase: {phase}");
    }
    assert!(v["decode"].as_array().is_some_and(|d| !d.is_empty()), "and decode cells");
}

async fn write_golden_record(path: &Path) {
    let sim = sim(SimSpec::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let url = sim.handle.url();
    let mut args: Vec<String> = ["run", "--url", url.as_str(), "--contexts", "1k,2k", "--concurrency", "1,2"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for a in QUICK.iter().chain(&[
        "--duration",
        "1s",
        "--max-tokens",
        "64",
        "--label",
        "golden <b>&",
        "--cost-per-hour",
        "7.5",
        "--matrix",
        "--request-rate",
        "5,20",
        "--requests",
        "4",
        "--burst",
        "--sessions",
        "2",
        "--turns",
        "2",
        "--think-time",
        "100ms",
        "--turn-tokens",
        "16",
        "--mixed-prefill",
        "2k@2",
        "--mixed-prefill-probes",
        "1",
        "--mixed-prefill-window",
        "500ms",
        "--active-params",
        "1B",
        "--bytes-per-weight",
        "2",
        "--kv-bytes-per-token",
        "4096",
    ]) {
        args.push(a.to_string());
    }
    let out_dir = dir.path().to_path_buf();
    let output =
        tokio::task::spawn_blocking(move || speedmatrix().args(&args).arg("--out").arg(&out_dir).output().unwrap())
            .await
            .unwrap();
    sim.handle.shutdown().await;
    let r = result(dir.path(), output);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let text = std::fs::read_to_string(dir.path().join("run.json")).unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text.replace(url.as_str(), "http://127.0.0.1:8000")).unwrap();
}
