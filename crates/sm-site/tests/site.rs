//! The site's storage without a server: tokens kept as hashes only, and an
//! unreachable database reported with its cause (at once when refused, after
//! the connect timeout when nothing answers). The HTTP suite
//! (upload → list → view → compare, hostile input) runs against a real
//! `speedmatrix serve` process in crates/speedmatrix/tests/site_http.rs.

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
