//! `run --tools FILE.json` (methodology §7.3.1, issue 33 §2): OpenAI tool definitions sent with every
//! chat request, checked here, and what the record keeps of the file — never its content.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the record keeps of a `--tools` file: enough to tell it again on `--resume`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolsInfo {
    /// The file's name without its directories (a path can name a user).
    pub name: String,
    /// SHA-256 of the file's bytes, hex.
    pub sha256: String,
    /// The file's size, bytes.
    pub bytes: u64,
    /// The tools' function names, in the file's order; the prompts invite a call of the first.
    pub names: Vec<String>,
}

impl ToolsInfo {
    /// The sentence appended to a prompt's question so that a model calls a tool.
    pub fn invitation(&self) -> String {
        invitation(self.names.first().map_or("", String::as_str))
    }
}

/// See [`ToolsInfo::invitation`].
pub fn invitation(name: &str) -> String {
    format!("Call the tool {name} now.")
}

/// Why a `--tools` file cannot be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolsError {
    #[error("it is not JSON: {0}")]
    NotJson(String),
    #[error(
        "it must be a JSON array of tool definitions, [{{\"type\": \"function\", \"function\": {{\"name\": …}}}}], not {0}"
    )]
    NotArray(&'static str),
    #[error("the array is empty: give at least one tool")]
    Empty,
    #[error("tool {index} is not an object")]
    NotObject { index: usize },
    #[error("tool {index} has \"type\": {found}; only \"function\" tools are sent")]
    NotFunction { index: usize, found: String },
    #[error("tool {index} has no function.name (a non-empty string)")]
    NoName { index: usize },
    #[error("tool {index}'s function.parameters must be a JSON object (a JSON Schema)")]
    Parameters { index: usize },
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The definitions a file holds, checked, and their function names. A tool counts (numbered from
/// 1 in errors) when it is an object with `"type": "function"` (or no type) and a
/// `function.name`; `parameters`, where given, must be an object.
pub fn parse(bytes: &[u8]) -> Result<(Value, Vec<String>), ToolsError> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| ToolsError::NotJson(e.to_string()))?;
    let tools = match &v {
        Value::Array(a) => a,
        other => return Err(ToolsError::NotArray(kind(other))),
    };
    if tools.is_empty() {
        return Err(ToolsError::Empty);
    }
    let mut names = Vec::with_capacity(tools.len());
    for (i, t) in tools.iter().enumerate() {
        let index = i + 1;
        let Value::Object(o) = t else { return Err(ToolsError::NotObject { index }) };
        match o.get("type") {
            None => {}
            Some(Value::String(s)) if s == "function" => {}
            Some(other) => return Err(ToolsError::NotFunction { index, found: other.to_string() }),
        }
        let f = o.get("function");
        let name = f.and_then(|f| f.get("name")).and_then(Value::as_str).filter(|n| !n.trim().is_empty());
        let Some(name) = name else { return Err(ToolsError::NoName { index }) };
        if f.and_then(|f| f.get("parameters")).is_some_and(|p| !p.is_object()) {
            return Err(ToolsError::Parameters { index });
        }
        names.push(name.to_string());
    }
    Ok((v, names))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_of_function_tools_gives_its_names() {
        let text = br#"[{"type": "function", "function": {"name": "get_weather", "description": "d",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
            {"function": {"name": "search"}}]"#;
        let (v, names) = parse(text).unwrap();
        assert_eq!(names, ["get_weather", "search"]);
        assert_eq!(v[0]["function"]["name"], "get_weather");
        let info = ToolsInfo { name: "t.json".into(), sha256: "ab".into(), bytes: 3, names };
        assert_eq!(info.invitation(), "Call the tool get_weather now.");
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        for (text, want) in [
            (&b"{"[..], "it is not JSON"),
            (br#"{"type": "function"}"#, "it must be a JSON array of tool definitions"),
            (b"[]", "the array is empty"),
            (b"[1]", "tool 1 is not an object"),
            (br#"[{"type": "code_interpreter"}]"#, r#"tool 1 has "type": "code_interpreter""#),
            (br#"[{"function": {"name": "a"}}, {"type": "function", "function": {}}]"#, "tool 2 has no function.name"),
            (br#"[{"function": {"name": " "}}]"#, "tool 1 has no function.name"),
            (br#"[{"function": {"name": "a", "parameters": []}}]"#, "tool 1's function.parameters must be"),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.starts_with(want), "{}: {e}", String::from_utf8_lossy(text));
        }
    }
}
