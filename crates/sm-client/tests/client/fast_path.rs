//! The measuring fast path against its references: `scan::read_chunk` against `parse_chunk`, and
//! `SseParser::push_bytes` (events sharing the read buffer) against the copying parser it
//! replaced, on generated chunks (escapes, unicode, usage, errors, odd shapes, mutations), on the
//! fuzz corpus, on streams recorded from real engines (`fuzz/corpus/sse/real-*`: vLLM and llama.cpp
//! as the real-engine tests run them) and on engine-shaped streams (`doc-*`, built from the engines'
//! documented chunk shapes for the ones not at hand: SGLang, a reasoning parser). Tool calls
//! (`shape-*-tool-call`: OpenAI's, vLLM's and llama.cpp's documented deltas) are left to the
//! reference by the fast path, so those streams are held only to agreement, not to its share.

use std::borrow::Cow;
use std::path::PathBuf;

use bytes::Bytes;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use serde_json::{Value, json};
use sm_client::openai::parse_chunk;
use sm_client::scan::{read_chunk, scan_chunk};
use sm_client::sse::{SseEvent, SseParser};

fn config(cases: u32) -> Config {
    Config { cases, failure_persistence: None, rng_seed: RngSeed::Fixed(0xfa57_9a7e), ..Config::default() }
}

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files
        .into_iter()
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect()
}

/// The property: where the scanner answers, the reference gives exactly that chunk; where it does
/// not, `read_chunk` is the reference. Returns whether the fast path answered.
fn same_as_reference(data: &[u8]) -> bool {
    let reference = parse_chunk(data);
    let fast = scan_chunk(data);
    if let Some(fast) = &fast {
        match &reference {
            Ok(r) => {
                assert_eq!(&fast.clone().into_owned(), r, "fast path differs on {:?}", String::from_utf8_lossy(data))
            }
            Err(e) => {
                panic!("fast path accepted what the reference rejects ({e}): {:?}", String::from_utf8_lossy(data))
            }
        }
    }
    match (read_chunk(data), reference) {
        (Ok(got), Ok(want)) => assert_eq!(got.into_owned(), want),
        (Err(got), Err(want)) => assert_eq!(got.to_string(), want.to_string()),
        (got, want) => panic!("read_chunk {got:?} but the reference {want:?}"),
    }
    fast.is_some()
}

/// The copying SSE parser the read loop used before (kept here as the reference).
#[derive(Default)]
struct RefSse {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
}

impl RefSse {
    fn push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) {
        let mut all = std::mem::take(&mut self.line);
        all.extend_from_slice(bytes);
        let mut rest = all.as_slice();
        while let Some(pos) = rest.iter().position(|&b| b == b'\n') {
            let line = &rest[..pos];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            rest = &rest[pos + 1..];
            if line.is_empty() {
                if std::mem::take(&mut self.has_data) {
                    let d = std::mem::take(&mut self.data);
                    out.push(if d == b"[DONE]" { SseEvent::Done } else { SseEvent::Data(d.into()) });
                }
            } else if let Some(v) = line.strip_prefix(b"data:") {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(v.strip_prefix(b" ").unwrap_or(v));
                self.has_data = true;
            }
        }
        self.line = rest.to_vec();
    }
}

fn ref_events(data: &[u8]) -> Vec<SseEvent> {
    let mut out = Vec::new();
    RefSse::default().push(data, &mut out);
    out
}

fn fast_events(pieces: &[&[u8]]) -> (Vec<SseEvent>, usize) {
    let mut p = SseParser::new();
    let mut out = Vec::new();
    for piece in pieces {
        p.push_bytes(&Bytes::copy_from_slice(piece), &mut out);
    }
    (out, p.pending())
}

/// Events at every split point of the stream into two reads, and byte by byte, equal the
/// reference's; every chunk they carry reads the same on both paths. Returns how many chunks the
/// fast path answered, and how many there were.
fn check_stream(data: &[u8]) -> (usize, usize) {
    let want = ref_events(data);
    for split in 0..=data.len() {
        let (a, b) = data.split_at(split);
        assert_eq!(fast_events(&[a, b]).0, want, "split at {split}");
    }
    let bytewise: Vec<&[u8]> = data.chunks(1).collect();
    assert_eq!(fast_events(&bytewise).0, want);
    let chunks: Vec<&Bytes> =
        want.iter().filter_map(|e| if let SseEvent::Data(d) = e { Some(d) } else { None }).collect();
    let fast = chunks.iter().filter(|d| same_as_reference(d)).count();
    (fast, chunks.len())
}

#[test]
fn corpus_chunks_agree() {
    let mut fast = 0;
    let files = corpus("openai_chunk");
    for (_, data) in &files {
        fast += usize::from(same_as_reference(data));
    }
    assert!(fast > files.len() / 2, "the fast path answered only {fast} of {} seed chunks", files.len());
}

#[test]
fn corpus_streams_agree_at_every_split() {
    for (name, data) in corpus("sse") {
        let (fast, all) = check_stream(&data);
        // the engines' usual token chunks must take the fast path, or it saves nothing
        let engine_shaped = name.starts_with("doc-") || name.starts_with("real-");
        if engine_shaped || (name.ends_with("-chat") && !name.contains("fault")) {
            assert!(fast * 10 >= all * 8, "{name}: the fast path answered {fast} of {all} chunks");
        }
    }
}

/// The shapes each engine documents take the fast path, and borrow the token's text.
#[test]
fn engine_token_chunks_borrow_their_text() {
    let chunks: [&[u8]; 4] = [
        br#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" the"},"logprobs":null,"finish_reason":null}]}"#,
        br#"{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" the"}}],"created":1,"id":"chatcmpl-x","model":"m","system_fingerprint":"b1","object":"chat.completion.chunk"}"#,
        br#"{"id":"a","object":"chat.completion.chunk","created":1,"model":"default","choices":[{"index":0,"delta":{"role":null,"content":" the","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}"#,
        br#"{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" the","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":{"prompt_tokens":9,"total_tokens":10,"completion_tokens":1}}"#,
    ];
    for data in chunks {
        assert!(same_as_reference(data));
        let c = scan_chunk(data).unwrap();
        assert!(matches!(c.text, Cow::Borrowed(" the")), "{c:?}");
        assert!(matches!(c.id, Some(Cow::Borrowed(_))));
    }
}

/// A streamed tool call, as each engine sends it: every chunk reads the same on both paths, and the
/// call's arguments, joined, are the JSON object the stream carried.
#[test]
fn tool_call_streams_agree_and_carry_their_arguments() {
    for name in ["shape-openai-tool-call", "shape-vllm-tool-call", "shape-llamacpp-tool-call", "vllm-tool-call"] {
        let (_, data) = corpus("sse").into_iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{name}"));
        check_stream(&data);
        let chunks: Vec<_> = ref_events(&data)
            .into_iter()
            .filter_map(|e| if let SseEvent::Data(d) = e { Some(read_chunk(&d).unwrap().into_owned()) } else { None })
            .collect();
        let calls: Vec<_> = chunks.iter().filter(|c| c.tool_call).collect();
        assert!(calls.len() >= 3 && calls.iter().all(|c| c.has_text), "{name}: every call delta is output");
        let args: String = calls.iter().map(|c| c.tool_args.as_str()).collect();
        assert!(serde_json::from_str::<Value>(&args).unwrap().is_object(), "{name}: {args}");
        assert!(chunks.iter().all(|c| c.content.is_empty()), "{name}: a call is not content");
    }
}

#[test]
fn unusual_shapes_fall_back() {
    for data in [
        &br#"{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]}"#[..], // two choices
        br#"{"error":{"message":"boom"}}"#,
        br#"{"id":"x","id":"y"}"#, // duplicate field: the reference rejects it
        br#"{"choices":[{"delta":{"cont\u0065nt":"a"}}]}"#, // an escaped key
        br#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#, // a call
        br#"{"choices":[{"text":"\ud800"}]}"#, // a lone surrogate
        br#"{"usage":{"completion_tokens":1.0}}"#, // a float count
        br#"{"usage":{"completion_tokens":-0}}"#,
        br#"{"usage":{"completion_tokens":99999999999999999999}}"#,
        b"[\"x\"]",
        b"{\"id\":\"\xff\"}",
    ] {
        assert!(scan_chunk(data).is_none(), "{:?}", String::from_utf8_lossy(data));
        same_as_reference(data);
    }
    // ...while escapes it knows are unescaped like the reference's
    assert!(same_as_reference(br#"{"choices":[{"delta":{"content":"a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"}}]}"#));
}

// ------------------------------------------------------------------ generated chunks

/// Text with what JSON must escape, non-ASCII and astral characters.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[ a-z]{0,6}",
        2 => "[\"\\\\/\n\r\t\u{0}\u{1f}é€😀 a]{0,6}",
        1 => "\\PC{0,4}",
    ]
}

fn opt_text() -> impl Strategy<Value = Option<Option<String>>> {
    prop_oneof![Just(None), Just(Some(None)), text().prop_map(|s| Some(Some(s)))]
}

fn count() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        Just(Some(Value::Null)),
        (0u64..5000).prop_map(|n| Some(json!(n))),
        any::<u64>().prop_map(|n| Some(json!(n)))
    ]
}

fn put(obj: &mut serde_json::Map<String, Value>, key: &str, v: Option<Value>) {
    if let Some(v) = v {
        obj.insert(key.into(), v);
    }
}

fn put_text(obj: &mut serde_json::Map<String, Value>, key: &str, p: Option<Option<String>>) {
    put(obj, key, p.map(|t| t.map_or(Value::Null, Value::String)));
}

/// content, reasoning_content, reasoning, which role/tool-call shape (see `choice_value`), and
/// a tool call's arguments fragment.
type Delta = (Option<Option<String>>, Option<Option<String>>, Option<Option<String>>, u8, String);
type Choice = (Option<Delta>, Option<Option<String>>, Option<Option<String>>, bool);

fn delta() -> impl Strategy<Value = Delta> {
    (opt_text(), opt_text(), opt_text(), 0u8..6, text())
}

fn choice() -> impl Strategy<Value = Choice> {
    (
        prop::option::of(delta()),
        opt_text(),
        prop::option::of(prop_oneof![Just(None), Just(Some("length".to_string())), Just(Some("stop".to_string()))]),
        any::<bool>(),
    )
}

fn choice_value((d, text, finish, extras): Choice) -> Value {
    let mut c = serde_json::Map::new();
    c.insert("index".into(), json!(0));
    if let Some((content, rc, r, calls, args)) = d {
        let mut delta = serde_json::Map::new();
        match calls {
            1 => {
                delta.insert("role".into(), json!("assistant"));
                delta.insert(
                    "tool_calls".into(),
                    json!([{"id": "t", "function": {"arguments": "{\"a\": [1, 2.5e-3, true]}"}}]),
                );
            }
            // the shapes of a streamed call: the name's delta, a fragment (OpenAI's with nulls),
            // and the empty list and null other deltas may carry
            2 => {
                let call = json!({"index": 0, "id": "call_1", "type": "function", "function": {"name": args, "arguments": ""}});
                delta.insert("tool_calls".into(), json!([call]));
            }
            3 => {
                let call = json!({"index": 0, "id": null, "type": null, "function": {"arguments": args, "name": null}});
                delta.insert("tool_calls".into(), json!([call]));
            }
            4 => {
                delta.insert("tool_calls".into(), json!([]));
            }
            5 => {
                delta.insert("tool_calls".into(), Value::Null);
            }
            _ => {}
        }
        put_text(&mut delta, "content", content);
        put_text(&mut delta, "reasoning_content", rc);
        put_text(&mut delta, "reasoning", r);
        c.insert("delta".into(), Value::Object(delta));
    }
    put_text(&mut c, "text", text);
    put_text(&mut c, "finish_reason", finish);
    if extras {
        c.insert("logprobs".into(), json!({"content": [{"token": "a", "logprob": -0.25, "bytes": [97]}]}));
        c.insert("stop_reason".into(), Value::Null);
    }
    Value::Object(c)
}

fn chunk() -> impl Strategy<Value = Value> {
    let details = (prop::option::of(count()), prop::option::of(count()));
    let usage = prop::option::of((count(), count(), details, any::<bool>()));
    (opt_text(), prop::collection::vec(choice(), 0..3), usage, any::<bool>()).prop_map(
        |(id, choices, usage, null_usage)| {
            let mut o = serde_json::Map::new();
            put_text(&mut o, "id", id);
            o.insert("object".into(), json!("chat.completion.chunk"));
            o.insert("created".into(), json!(1_796_226_205));
            o.insert("choices".into(), Value::Array(choices.into_iter().map(choice_value).collect()));
            match usage {
                Some((p, c, (details, reasoning), total)) => {
                    let mut u = serde_json::Map::new();
                    put(&mut u, "prompt_tokens", p);
                    put(&mut u, "completion_tokens", c);
                    if total {
                        u.insert("total_tokens".into(), json!(12));
                    }
                    if let Some(d) = details {
                        let mut dm = serde_json::Map::new();
                        put(&mut dm, "cached_tokens", d);
                        u.insert("prompt_tokens_details".into(), Value::Object(dm));
                    }
                    // a reasoning model's count of its thinking tokens
                    if let Some(r) = reasoning {
                        let mut dm = serde_json::Map::new();
                        put(&mut dm, "reasoning_tokens", r);
                        u.insert("completion_tokens_details".into(), Value::Object(dm));
                    }
                    o.insert("usage".into(), Value::Object(u));
                }
                None if null_usage => {
                    o.insert("usage".into(), Value::Null);
                }
                None => {}
            }
            Value::Object(o)
        },
    )
}

/// Python's `json.dumps` default: every non-ASCII character as `\uXXXX`, astral ones as a pair.
fn ascii_escaped(compact: &str) -> String {
    let mut out = String::with_capacity(compact.len());
    for ch in compact.chars() {
        if ch.is_ascii() {
            out.push(ch);
        } else {
            let mut units = [0u16; 2];
            for u in ch.encode_utf16(&mut units) {
                out += &format!("\\u{u:04x}");
            }
        }
    }
    out
}

fn render(v: &Value, style: u8) -> Vec<u8> {
    match style % 3 {
        0 => serde_json::to_vec(v).unwrap(),
        1 => serde_json::to_vec_pretty(v).unwrap(),
        _ => ascii_escaped(&serde_json::to_string(v).unwrap()).into_bytes(),
    }
}

/// Bytes that make or break JSON, for mutations.
fn mutant_byte() -> impl Strategy<Value = u8> {
    prop_oneof![prop::sample::select(b"\"\\{}[],:0123456789-+.eEnulltrfas \n\xc3\xff".to_vec()), any::<u8>()]
}

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn generated_chunks_agree(v in chunk(), style in any::<u8>()) {
        let data = render(&v, style);
        let fast = same_as_reference(&data);
        // one choice or none, no error: the fast path must answer
        let choices = v["choices"].as_array().map_or(0, Vec::len);
        // a tool call is left to the reference
        let call = v["choices"].as_array().into_iter().flatten().any(|c| {
            c["delta"]["tool_calls"].as_array().is_some_and(|a| !a.is_empty())
        });
        prop_assert!(fast || choices > 1 || call, "fell back on {}", String::from_utf8_lossy(&data));
    }

    #[test]
    fn mutated_chunks_agree(
        v in chunk(),
        style in any::<u8>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, mutant_byte()), 1..4),
    ) {
        let mut data = render(&v, style);
        for (at, kind, byte) in edits {
            let i = at.index(data.len() + 1);
            match kind {
                0 if i < data.len() => { data.remove(i); }
                1 if i < data.len() => data[i] = byte,
                _ => data.insert(i, byte),
            }
        }
        same_as_reference(&data);
    }

    #[test]
    fn any_bytes_agree(data in prop::collection::vec(mutant_byte(), 0..120)) {
        same_as_reference(&data);
    }

    /// A generated stream of chunks: the same events at every split into two reads.
    #[test]
    fn generated_streams_agree(vs in prop::collection::vec((chunk(), any::<u8>()), 1..4), crlf in any::<bool>()) {
        let eol: &[u8] = if crlf { b"\r\n" } else { b"\n" };
        let mut stream = Vec::new();
        for (v, style) in &vs {
            for line in render(v, *style).split(|&b| b == b'\n') {
                stream.extend_from_slice(b"data: ");
                stream.extend_from_slice(line);
                stream.extend_from_slice(eol);
            }
            stream.extend_from_slice(eol);
        }
        stream.extend_from_slice(b"data: [DONE]\n\n");
        check_stream(&stream);
    }
}
