//! The site's storage without a server: tokens kept as hashes only, and an
//! unreachable database reported with its cause (at once when refused, after
//! the connect timeout when nothing answers). The HTTP suite
//! (upload → list → view → compare, hostile input) runs against a real
//! `speedmatrix serve` process in crates/speedmatrix/tests/cli/site_http.rs.

use sm_site::{Db, tokens};

#[tokio::test]
async fn tokens_are_stored_as_hashes_only() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let db = Db::connect(&url).await.unwrap();
    let token = tokens::create(&db, "carol").await.unwrap();
    assert!(matches!(tokens::create(&db, "bad name").await, Err(sm_site::SiteError::BadTokenName(_))));
    assert_eq!(tokens::check(&db, &token).await.unwrap().as_deref(), Some("carol"));
    db.close().await;
    let raw = std::fs::read(dir.path().join("t.db")).unwrap();
    let hay = String::from_utf8_lossy(&raw);
    assert!(!hay.contains(&token[4..]), "the token itself is in the database file");
    assert!(hay.contains(&tokens::hash(&token)));
    // a revoked name can be given a new token; the old one stays dead
    let db = Db::connect(&url).await.unwrap();
    assert!(db.revoke_token("carol").await.unwrap());
    assert!(!db.revoke_token("carol").await.unwrap());
    let again = tokens::create(&db, "carol").await.unwrap();
    assert_eq!(tokens::check(&db, &token).await.unwrap(), None);
    assert_eq!(tokens::check(&db, &again).await.unwrap().as_deref(), Some("carol"));
    let list = db.list_tokens().await.unwrap();
    assert_eq!(list.len(), 1);
    assert!(list[0].revoked_at.is_none());
    db.close().await;
}

/// A PostgreSQL URL on a port nobody listens on: the error names the refused
/// connection instead of a pool timeout.
#[tokio::test]
async fn an_unreachable_database_is_reported_with_its_cause() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("postgres://nobody@127.0.0.1:{port}/none?sslmode=disable");
    let err = Db::connect(&url).await.expect_err("nothing listens there").to_string();
    assert!(err.to_lowercase().contains("connection refused"), "{err}");
    assert!(!err.contains("timed out"), "{err}");
}

/// A server that accepts connections and never answers: given up after the
/// connect timeout, saying so, instead of waiting on the pool.
#[tokio::test]
async fn a_silent_database_is_given_up_on() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let url = format!("postgres://nobody@127.0.0.1:{port}/none?sslmode=disable");
    let err = Db::connect(&url).await.expect_err("nothing answers").to_string();
    assert!(err.contains("no answer within 5 s"), "{err}");
}

/// SQLite always; PostgreSQL too when `SPEEDMATRIX_TEST_POSTGRES` names a database.
fn databases(dir: &tempfile::TempDir) -> Vec<String> {
    let mut urls = vec![format!("sqlite://{}", dir.path().join("s.db").display())];
    if let Ok(pg) = std::env::var("SPEEDMATRIX_TEST_POSTGRES")
        && !pg.trim().is_empty()
    {
        urls.push(pg.trim().to_string());
    }
    urls
}

/// The sample run with `label`, prepared for storing by `uploader`.
fn prepared(label: &str, uploader: &str) -> sm_site::db::StoredRun {
    let text = include_str!("../../../tests/data/run-sample.json");
    let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
    v["label"] = label.into();
    sm_site::ingest::prepare(&v.to_string(), uploader).unwrap().1
}

/// The same run stored twice is one row, under the first id; the list's total
/// and its rows agree while runs are being stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_row_per_run_and_one_snapshot_per_list() {
    use sm_site::db::{Filter, Inserted, ListQuery};
    let dir = tempfile::tempdir().unwrap();
    for url in databases(&dir) {
        let db = Db::connect(&url).await.unwrap();
        let who = format!("snap-{}", tokens::random_hex(4).unwrap());
        let first = prepared(&who, &who);
        assert_eq!(db.insert_run(&first).await.unwrap(), Inserted::New);
        let again = prepared(&who, &who);
        assert_ne!(again.id, first.id, "a fresh id is drawn for every upload");
        assert_eq!(db.insert_run(&again).await.unwrap(), Inserted::Existing(first.id.clone()));

        let writer = {
            let db = db.clone();
            let who = who.clone();
            tokio::spawn(async move {
                for i in 0..60 {
                    let run = prepared(&format!("{who} {i}"), &who);
                    assert_eq!(db.insert_run(&run).await.unwrap(), Inserted::New);
                }
            })
        };
        let q = ListQuery {
            filter: Filter { uploader: Some(who.clone()), ..Filter::default() },
            per_page: 200,
            ..ListQuery::default()
        };
        let mut reads = 0;
        while !writer.is_finished() {
            let (runs, total) = db.list_runs(&q).await.unwrap();
            assert_eq!(runs.len() as i64, total, "{url}: a page of {} rows says {total} in all", runs.len());
            reads += 1;
        }
        writer.await.unwrap();
        let (runs, total) = db.list_runs(&q).await.unwrap();
        assert_eq!((runs.len(), total), (61, 61), "{url} after {reads} reads");
        // a page past the end still says how many there are
        let past = ListQuery { page: 9, per_page: 10, ..q };
        let (rows, total) = db.list_runs(&past).await.unwrap();
        assert_eq!((rows.len(), total), (0, 61), "{url}");
        db.close().await;
    }
}

/// A run with a replay keeps its answer on the trace in its row: the list shows it without
/// reading the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replay_answer_is_stored_with_the_run() {
    use sm_site::db::{Filter, ListQuery};
    let dir = tempfile::tempdir().unwrap();
    for url in databases(&dir) {
        let db = Db::connect(&url).await.unwrap();
        let who = format!("replay-{}", tokens::random_hex(4).unwrap());
        let text = include_str!("../../../tests/data/run-replay.json");
        let (_, run) = sm_site::ingest::prepare(text, &who).unwrap();
        let answer = run.replay_capacity.clone().expect("the replay's answer");
        assert_eq!((answer.max_scale, answer.failed_scale), (Some(2.0), Some(3.0)));
        db.insert_run(&run).await.unwrap();
        let q =
            ListQuery { filter: Filter { uploader: Some(who.clone()), ..Filter::default() }, ..ListQuery::default() };
        let (runs, _) = db.list_runs(&q).await.unwrap();
        assert_eq!(runs[0].replay_capacity.as_ref(), Some(&answer), "{url}");
        let stored = db.get_run(&run.id).await.unwrap().unwrap();
        assert_eq!(stored.replay_capacity, Some(answer), "{url}");
        // a run without a replay has none
        let plain = prepared(&who, &who);
        assert!(plain.replay_capacity.is_none());
        db.close().await;
    }
}
