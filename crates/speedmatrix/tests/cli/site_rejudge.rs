//! The viewer's SLO on the runs list (methodology §11.3), over HTTP against a real
//! `speedmatrix serve`: runs judged under it come first; every other run on the page is re-judged
//! under it from the figures it stored, labelled "re-judged", where each bound names a figure it
//! stored exactly, and says which bound it cannot answer where not. On SQLite always, on
//! PostgreSQL when `SPEEDMATRIX_TEST_POSTGRES` names one.

use serde_json::{Value, json};
use sm_site::tokens;

use crate::site_common::site::{Site, ids, mark, start, unique};

const SAMPLE: &str = include_str!("../../../../tests/data/run-sample.json");
/// A speedmatrix.run/1.1 run judged from its requests under `tok_s_p10>=400`: 1K and 8K at 1, 4
/// (and 16 at 1K); TTFT p90 2.276, 4.686, 7.654 ms at 1K and 2.289, 7.356 ms at 8K.
const CAPACITY: &str = include_str!("../../../../tests/data/run-capacity-1.1.json");
/// The published run the seed profile replays: p50 figures only.
const PAGE: &str = include_str!("../../../../tests/data/reference/ling-3.0-flash-int4-2xh200nvl.lil-bench-result.json");

/// The viewer's SLO: TTFT p90 from every run's summaries, tok/s p10 only from a run that measured
/// it per request.
const VIEWER: &str = "ttft_p90<=5ms,tok_s_p10>=300";

fn sample() -> String {
    let mut v: Value = serde_json::from_str(SAMPLE).unwrap();
    v["run_id"] = json!(unique("sample"));
    v.to_string()
}

async fn suite(url: &str) {
    let site = start(url).await;
    let who = unique("rejudge");
    let token = tokens::create(&site.db, &who).await.unwrap();
    let capacity = site.upload(&token, &mark(CAPACITY, &site.tag), false).await;
    let page = site.upload(&token, &mark(PAGE, &site.tag), false).await;
    let sample = site.upload(&token, &sample(), false).await;
    listed(&site, &who, &capacity, &page, &sample).await;
    shown(&site, &who).await;
    compared(&site, &capacity, &page, &sample).await;
}

/// The comparison's runs under the baseline's SLO where theirs differ.
async fn compared(site: &Site, capacity: &str, page: &str, sample: &str) {
    let (status, html) = site.get(&format!("/compare?ids={capacity},{page}")).await;
    assert!(status.is_success(), "{html}");
    assert!(html.contains("Under A&#39;s SLO") || html.contains("Under A's SLO"), "{html}");
    assert!(html.contains("cannot answer tok_s_p10 (the run stored p50 only)"), "{html}");
    // the 1.1 run measured tok_s_p10 per request and stored each cell's TTFT p90: it answers the
    // sample's default SLO (tok_s_p10>=20, ttft_p90<=2s): every level passes, up to what fits
    let (_, html) = site.get(&format!("/compare?ids={sample},{capacity}")).await;
    assert!(html.contains("<td>re-judged: <span class=\"ans\""), "{html}");
}

fn encoded(slo: &str) -> String {
    slo.replace('<', "%3C").replace('>', "%3E").replace('=', "%3D").replace(',', "%2C")
}

async fn listed(site: &Site, who: &str, capacity: &str, page: &str, sample: &str) {
    let list = site.get_json(&format!("/api/runs?uploader={who}&slo={}", encoded(VIEWER))).await;
    assert_eq!(ids(&list).len(), 3, "the viewer's SLO filters no run out: {list}");
    let of = |id: &str| list["runs"].as_array().unwrap().iter().find(|r| r["id"] == id).unwrap()["rejudged"].clone();
    // under the viewer's SLO, from the figures the run stored: at 1K the TTFT p90 of 16 users
    // (7.654 ms) is the first over 5 ms, at 8K that of 4 (7.356 ms); tok/s p10 holds throughout
    let answer: Vec<(i64, i64, String)> = of(capacity)["answer"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|r| (r["context"].as_i64().unwrap(), r["max_users"].as_i64().unwrap(), r["bounded_by"].to_string()))
        .collect();
    let slo = "\"slo:ttft_p90\"".to_string();
    assert_eq!(answer, [(1024, 4, slo.clone()), (8192, 1, slo)], "{list}");
    // the stored answer under its own SLO stays as it was
    let own = list["runs"].as_array().unwrap().iter().find(|r| r["id"] == capacity).unwrap();
    assert_eq!(own["capacity"][1]["bounded_by"], "kv_cache", "{own}");
    assert_eq!(of(page), json!({"cannot": "cannot answer ttft_p90 (the run stored p50 only)"}), "{list}");
    // judged from its summaries, the sample's tok/s p10 was read off its TBT p90: not stored
    assert_eq!(of(sample), json!({"cannot": "cannot answer tok_s_p10 (the run stored p50 only)"}), "{list}");
    // without the viewer's SLO nothing is re-judged
    let plain = site.get_json(&format!("/api/runs?uploader={who}")).await;
    assert!(plain["runs"].as_array().unwrap().iter().all(|r| r.get("rejudged").is_none()), "{plain}");
}

async fn shown(site: &Site, who: &str) {
    let (status, html) = site.get(&format!("/?uploader={who}&context=8K&slo={}", encoded(VIEWER))).await;
    assert!(status.is_success(), "{html}");
    let viewer = "<code>ttft_p90&lt;=5ms,tok_s_p10&gt;=300</code>";
    assert_eq!(html.matches(&format!("re-judged under {viewer}: ")).count(), 1, "{html}");
    assert!(html.contains(&format!("under {viewer}: cannot answer ttft_p90 (the run stored p50 only)")), "{html}");
    assert!(html.contains("rank this SLO&#39;s runs first") || html.contains("rank this SLO's runs first"), "{html}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_rejudged_under_the_viewers_slo() {
    let dir = tempfile::tempdir().unwrap();
    suite(&format!("sqlite://{}", dir.path().join("site.db").display())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_rejudged_under_the_viewers_slo() {
    if let Some((url, _one_suite)) = crate::site_common::postgres().await {
        suite(&url).await;
    }
}
