//! `--trace`: ground truth per finished request, and profile files.

use crate::common::*;
use serde_json::{Value, json};
use sm_sim::{Profile, ProfileError};

#[tokio::test]
async fn trace_records_every_request() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let p2 = path.clone();
    let sim = sim_with(move |o| o.trace = Some(p2)).await;
    let url = sim.url();
    let prompt = words(100, "t");
    let body = json!({"prompt": prompt, "max_tokens": 10, "ignore_eos": true, "stream": true});
    post_stream(&url, "/v1/completions", body.clone(), &[]).await;
    post_stream(&url, "/v1/completions", body.clone(), &[("x-sim-fault", "multi-token=3")]).await;
    let cut = post_stream(&url, "/v1/completions", body, &[("x-sim-fault", "disconnect-after=4")]).await;
    assert!(cut.broken);
    sim.shutdown().await;

    let text = std::fs::read_to_string(&path).unwrap();
    let recs: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(recs.len(), 3, "{text}");
    for r in &recs {
        let t = |k: &str| r[k].as_f64().unwrap();
        assert!(
            t("arrival") <= t("admitted") && t("admitted") <= t("first_token") && t("first_token") <= t("end"),
            "{r}"
        );
        assert_eq!(r["prompt_tokens"], 100);
        assert!(r.get("noise").is_none(), "a profile without [noise] records none: {r}");
        let em = r["emissions"].as_array().unwrap();
        let total: u64 = em.iter().map(|e| e[1].as_u64().unwrap()).sum();
        assert_eq!(total, r["completion_tokens"].as_u64().unwrap());
        assert_eq!(em[0][0].as_f64().unwrap(), t("first_token"));
        assert!(em.windows(2).all(|w| w[0][0].as_f64() < w[1][0].as_f64()));
    }
    assert_eq!(recs[0]["finish"], "length");
    assert_eq!(recs[0]["cached_tokens"], 0);
    assert_eq!(recs[0]["completion_tokens"], 10);
    assert_eq!(recs[1]["cached_tokens"], 96);
    assert_eq!(recs[1]["emissions"].as_array().unwrap().len(), 4, "3+3+3+1");
    assert_eq!(recs[2]["finish"], "disconnect");
    assert!(recs[2]["completion_tokens"].as_u64().unwrap() < 10);
}

#[test]
fn profile_files_are_validated_with_key_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.toml");
    std::fs::write(&good, include_str!("../../profiles/tiny.toml").replace("name = \"tiny\"", "name = \"mine\""))
        .unwrap();
    assert_eq!(Profile::resolve(good.to_str().unwrap()).unwrap().name, "mine");
    let bad = dir.path().join("bad.toml");
    let text = include_str!("../../profiles/tiny.toml").replace("  [2.1, 2.3],\n", "  [2.1],\n");
    std::fs::write(&bad, text).unwrap();
    let e = Profile::from_file(&bad).unwrap_err();
    let ProfileError::File { ref path, ref error } = e else { panic!("not a file error: {e}") };
    assert_eq!(path, &bad.display().to_string());
    assert!(matches!(**error, ProfileError::Invalid { ref key, .. } if key == "decode.step_ms[1]"), "{e}");
    let msg = e.to_string();
    assert!(msg.contains(path.as_str()) && msg.contains("has 1 values but the contexts axis has 2"), "{msg}");
    // a file that is not TOML, reached by path through `resolve`, is named too
    let broken = dir.path().join("broken.toml");
    std::fs::write(&broken, "name = ").unwrap();
    let msg = Profile::resolve(broken.to_str().unwrap()).unwrap_err().to_string();
    assert!(msg.contains(broken.to_str().unwrap()) && msg.contains("not valid TOML"), "{msg}");
    let e = Profile::resolve("no-such-profile").unwrap_err().to_string();
    assert!(e.contains("seed-ling-3.0-flash-h200nvl-x2, tiny"), "{e}");
}

/// A request's arrival is when its head reached the server, not when its body was read and
/// tokenized: a long prompt's upload and tokenization are part of the TTFT a client sees from a
/// real engine, and the profile's TTFTs were measured by a client. Here the body follows its head
/// by a pause, so the first token cannot leave before the pause has passed since the arrival.
#[tokio::test]
async fn arrival_is_stamped_when_the_request_head_arrives() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const PAUSE: std::time::Duration = std::time::Duration::from_millis(400);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let p2 = path.clone();
    let sim = sim_with(move |o| o.trace = Some(p2)).await;
    let body = json!({"prompt": words(50, "h"), "max_tokens": 2, "ignore_eos": true}).to_string();
    let mut tcp = tokio::net::TcpStream::connect(sim.addr()).await.unwrap();
    let head = format!(
        "POST /v1/completions HTTP/1.1\r\nhost: sim\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.flush().await.unwrap();
    tokio::time::sleep(PAUSE).await;
    tcp.write_all(body.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    sim.shutdown().await;

    let text = std::fs::read_to_string(&path).unwrap();
    let r: Value = serde_json::from_str(text.lines().next().expect("one request traced")).unwrap();
    let ttft = r["first_token"].as_f64().unwrap() - r["arrival"].as_f64().unwrap();
    assert!(ttft >= PAUSE.as_secs_f64(), "arrival to first token {ttft:.3} s: the arrival was stamped after the body");
}

/// `[natural_output]`: without `ignore_eos`, each request of the same prompt stops at its own
/// length, the one the table draws for its id; the trace says which stopped (`stop`) and which
/// reached `max_tokens` (`length`). With `ignore_eos` the table changes nothing.
#[tokio::test]
async fn natural_output_lengths_are_drawn_per_request_and_traced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let text = include_str!("../../profiles/tiny.toml").replace(
        "natural_output_tokens = 256\n",
        "natural_output_tokens = 256\n[natural_output]\nmean = 30\ncv = 0.7\nseed = 5\n",
    );
    let profile = profile_from(&text);
    let dist = profile.natural_output.expect("the table is read");
    let p2 = path.clone();
    let sim = sim_with(move |o| {
        o.profile = profile;
        o.trace = Some(p2);
    })
    .await;
    let url = sim.url();
    let prompt = words(50, "n");
    for _ in 0..12 {
        post_stream(&url, "/v1/completions", json!({"prompt": prompt, "max_tokens": 30, "stream": true}), &[]).await;
    }
    let eos = json!({"prompt": prompt, "max_tokens": 30, "stream": true, "ignore_eos": true});
    post_stream(&url, "/v1/completions", eos, &[]).await;
    sim.shutdown().await;
    let recs: Vec<Value> =
        std::fs::read_to_string(&path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(recs.len(), 13);
    for r in &recs[..12] {
        let natural = dist.length(r["id"].as_u64().unwrap());
        let (n, finish) = (r["completion_tokens"].as_u64().unwrap(), r["finish"].as_str().unwrap());
        if natural < 30 {
            assert_eq!((n, finish), (natural, "stop"), "{r}");
        } else {
            assert_eq!((n, finish), (30, "length"), "{r}");
        }
    }
    let lengths: std::collections::BTreeSet<u64> =
        recs[..12].iter().map(|r| r["completion_tokens"].as_u64().unwrap()).collect();
    assert!(lengths.len() > 3, "one prompt, many lengths: {lengths:?}");
    assert!(recs[..12].iter().any(|r| r["finish"] == "length") && recs[..12].iter().any(|r| r["finish"] == "stop"));
    assert_eq!((recs[12]["completion_tokens"].as_u64(), recs[12]["finish"].as_str()), (Some(30), Some("length")));
}
