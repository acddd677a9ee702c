//! Escaping for text that comes from a record: model names, launch commands
//! and error reasons are written by servers and users, never trusted as markup.

/// Text content and attribute values of HTML and SVG.
pub fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// A cell of a GitHub-flavoured Markdown table: no line breaks, no column
/// separators, and no raw HTML (GitHub would swallow `<redacted>` as a tag).
pub fn markdown_cell(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '|' => out.push_str("\\|"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\\' => out.push_str("\\\\"),
            '`' => out.push_str("\\`"),
            '*' | '_' | '[' | ']' => {
                out.push('\\');
                out.push(ch);
            }
            '\n' | '\r' => out.push(' '),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_text() {
        assert_eq!(html("<script>alert('x')</script>&"), "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;");
        assert_eq!(markdown_cell("a|b <redacted>\nc"), "a\\|b &lt;redacted&gt; c");
    }
}
