//! Escaping for text that comes from a record: model names, launch commands
//! and error reasons are written by servers and users, never trusted as markup.

/// Record text as the page's text content or attribute value: spliced into a `maud` template,
/// which escapes `&`, `<`, `>` and `"`. The engine leaves control characters alone, so they are
/// shown here as U+FFFD first (a NUL or a terminal escape in a model name is nothing a reader can
/// use); line breaks and tabs stay, for the multi-line hovers. Every text the page takes from a record goes through this one type.
#[derive(Debug, Clone, Copy)]
pub struct Text<'a>(pub &'a str);

impl maud::Render for Text<'_> {
    fn render_to(&self, buffer: &mut String) {
        if self.0.chars().any(shown_as_replacement) {
            let shown: String = self.0.chars().map(|c| if shown_as_replacement(c) { '\u{FFFD}' } else { c }).collect();
            shown.as_str().render_to(buffer);
        } else {
            self.0.render_to(buffer);
        }
    }
}

fn shown_as_replacement(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
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
        let page = maud::Render::render(&Text("<script>alert('x')</script>&\"\u{1b}[31m\u{0}\n\t")).into_string();
        assert_eq!(page, "&lt;script&gt;alert('x')&lt;/script&gt;&amp;&quot;\u{FFFD}[31m\u{FFFD}\n\t");
        assert_eq!(markdown_cell("a|b <redacted>\nc"), "a\\|b &lt;redacted&gt; c");
    }
}
