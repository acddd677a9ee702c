//! Splitting a shell-like command line into words without losing where each word stands, so a
//! secret can be replaced in place and the rest of the command keeps its exact layout.

use std::ops::Range;

/// One word: where it stands in the command and what the shell would pass (quotes removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    pub span: Range<usize>,
    pub text: String,
}

/// Splits `command` into words the way a POSIX shell does for quoting: `'…'` literally, `"…"`
/// with backslash escapes, a backslash outside quotes escapes the next character, and a
/// backslash before a newline continues the line. Operators (`|`, `;`, `&&`) are not special:
/// they come out as words of their own or as parts of words, which is all redaction needs.
pub fn words(command: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut chars = command.char_indices().peekable();
    let mut current: Option<(usize, String)> = None;
    while let Some((i, c)) = chars.next() {
        if c.is_whitespace() {
            if let Some((start, text)) = current.take() {
                out.push(Word { span: start..i, text });
            }
            continue;
        }
        let (_, text) = current.get_or_insert_with(|| (i, String::new()));
        match c {
            '\'' => {
                for (_, q) in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    text.push(q);
                }
            }
            '"' => {
                while let Some((_, q)) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => match chars.peek() {
                            Some(&(_, n @ ('"' | '\\' | '$' | '`'))) => {
                                text.push(n);
                                chars.next();
                            }
                            _ => text.push('\\'),
                        },
                        _ => text.push(q),
                    }
                }
            }
            '\\' => match chars.next() {
                // a line continuation ends the word like whitespace would
                Some((j, '\n')) => {
                    if let Some((start, text)) = current.take().filter(|(_, t)| !t.is_empty()) {
                        out.push(Word { span: start..j - 1, text });
                    }
                }
                Some((_, n)) => text.push(n),
                None => text.push('\\'),
            },
            _ => text.push(c),
        }
    }
    if let Some((start, text)) = current {
        out.push(Word { span: start..command.len(), text });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(cmd: &str) -> Vec<String> {
        words(cmd).into_iter().map(|w| w.text).collect()
    }

    #[test]
    fn quoting_and_spans() {
        let cmd = r#"a 'b c' "d \"e\"" f\ g --x='{"k": 1}'"#;
        assert_eq!(texts(cmd), ["a", "b c", "d \"e\"", "f g", "--x={\"k\": 1}"]);
        let w = words(cmd);
        assert_eq!(&cmd[w[1].span.clone()], "'b c'");
        assert_eq!(&cmd[w[4].span.clone()], r#"--x='{"k": 1}'"#);
    }

    #[test]
    fn line_continuations() {
        let cmd = "vllm serve m \\\n  --api-key k \\\n  --port 8000";
        assert_eq!(texts(cmd), ["vllm", "serve", "m", "--api-key", "k", "--port", "8000"]);
        let w = words(cmd);
        assert_eq!(&cmd[w[4].span.clone()], "k");
    }
}
