//! Text wrapped to a terminal's width: the console summary and the phases' sections share it.

pub(crate) fn clip(line: &str, width: usize) -> String {
    if line.chars().count() <= width {
        line.to_string()
    } else {
        line.chars().take(width.saturating_sub(1)).chain(['…']).collect()
    }
}

/// `text` wrapped to `width` columns, its leading spaces kept, each line after the first indented
/// by `indent` spaces.
pub(crate) fn hanging(text: &str, width: usize, indent: usize) -> String {
    let pad = " ".repeat(indent.min(width / 2));
    let mut lines: Vec<String> = Vec::new();
    let mut cur = text[..text.len() - text.trim_start().len()].to_string();
    for word in text.split_whitespace() {
        if !cur.trim().is_empty() && cur.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::replace(&mut cur, pad.clone()));
        }
        if !cur.trim().is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    lines.push(cur);
    lines.iter().map(|l| clip(l, width)).collect::<Vec<_>>().join("\n")
}

pub(crate) fn wrap(text: &str, width: usize) -> String {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines.iter().map(|l| clip(l, width)).collect::<Vec<_>>().join("\n")
}
