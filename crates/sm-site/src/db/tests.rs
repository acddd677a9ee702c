//! The database layer's own tests: URLs, the filter's SQL, the plans SQLite makes, migrations.

use super::*;

#[test]
fn urls() {
    assert_eq!(normalise_url("sqlite://site.db"), "sqlite://site.db?mode=rwc");
    assert_eq!(normalise_url("/tmp/x.db"), "sqlite:///tmp/x.db?mode=rwc");
    assert_eq!(normalise_url("sqlite://x.db?mode=ro"), "sqlite://x.db?mode=ro");
    assert_eq!(normalise_url("postgres://u@h/db"), "postgres://u@h/db");
}

#[test]
fn like_escapes_wildcards() {
    assert_eq!(like_pattern(" A_b%\\ "), "%a\\_b\\%\\\\%");
}

#[test]
fn where_numbers_parameters_in_order() {
    let f = Filter {
        model: Some("m".into()),
        from: Some(day(2026, 1, 1)),
        to: Some(day(2026, 1, 31)),
        engine_version: Some(" 0.27.2 ".into()),
        gpu_count: Some(2),
        ..Filter::default()
    };
    let (clause, binds) = where_clause(&f);
    assert_eq!(
        clause,
        " WHERE LOWER(model) LIKE $1 ESCAPE '\\' AND engine_version = $2 AND measured_at >= $3 \
         AND measured_at < $4 AND gpu_count = $5"
    );
    let text = |t: &str| Bind::Text(t.into());
    assert_eq!(binds, [text("%m%"), text("0.27.2"), text("2026-01-01"), text("2026-02-01"), Bind::Int(2)]);
}

fn day(y: i32, m: u8, d: u8) -> time::Date {
    time::Date::from_calendar_date(y, time::Month::try_from(m).unwrap(), d).unwrap()
}

/// A database of 500 runs, for the query planner: an empty table is scanned whatever its indexes.
async fn seeded(dir: &std::path::Path) -> Db {
    let db = Db::connect(&dir.join("plan.db").display().to_string()).await.unwrap();
    sqlx::query(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500) \
         INSERT INTO runs (id, uploaded_at, uploader, model, gpu, gpu_count, engine, engine_version, \
         measured_at, label, status, peak_tok_s, record, content_hash) SELECT printf('%012x', i), '2026-01-01T00:00:00Z', 'u' || i, 'm', 'g', i, 'e', \
         'v' || i, printf('2026-%02d-%02dT00:00:00Z', i % 12 + 1, i % 28 + 1), '', 'complete', 0.0, '{}', NULL \
         FROM n",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    db
}

/// SQLite's plan for the exact and range filters names their indexes.
#[tokio::test]
async fn exact_and_range_filters_use_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let db = seeded(dir.path()).await;
    sqlx::query("ANALYZE").execute(&db.pool).await.unwrap();
    for (filter, index) in [
        (Filter { gpu_count: Some(2), ..Filter::default() }, "runs_gpu_count"),
        (Filter { from: Some(day(2026, 9, 1)), to: Some(day(2026, 9, 30)), ..Filter::default() }, "runs_measured_at"),
        (Filter { engine_version: Some("0.27.2".into()), ..Filter::default() }, "runs_engine_version"),
        (Filter { uploader: Some("alice".into()), ..Filter::default() }, "runs_uploader"),
    ] {
        let (clause, binds) = where_clause(&filter);
        let sql = format!("EXPLAIN QUERY PLAN SELECT id FROM runs{clause}");
        let mut q = sqlx::query_as::<_, (i64, i64, i64, String)>(&sql);
        for b in binds {
            q = match b {
                Bind::Text(t) => q.bind(t),
                Bind::Int(n) => q.bind(n),
            };
        }
        let plan: Vec<String> = q.fetch_all(&db.pool).await.unwrap().into_iter().map(|r| r.3).collect();
        assert!(plan.iter().any(|p| p.contains(index)), "{clause}: {plan:?}");
    }
    db.close().await;
}

/// The list at one context reads the capacity table through its index on (context, users): its
/// cost follows the runs that measured the context, not the whole table.
#[tokio::test]
async fn the_context_filter_uses_its_index() {
    let dir = tempfile::tempdir().unwrap();
    let db = seeded(dir.path()).await;
    // every run answered at 20 contexts, so one context is a twentieth of the table
    sqlx::query(
        "WITH RECURSIVE k(j) AS (SELECT 1 UNION ALL SELECT j + 1 FROM k WHERE j < 20) \
         INSERT INTO capacity SELECT id, 1024 * j, j || 'K', j, 'matrix_top' FROM runs, k",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    // a run that measured two contexts both named 8K (8,192 and 8,300 tokens) is listed once by name
    sqlx::query("INSERT INTO capacity SELECT id, 8300, '8K', 99, 'kv_cache' FROM runs WHERE gpu_count = 7")
        .execute(&db.pool)
        .await
        .unwrap();
    sqlx::query("ANALYZE").execute(&db.pool).await.unwrap();
    let by = |label: Option<&str>, tokens: Option<u64>| ContextQuery { label: label.map(str::to_string), tokens };
    for (context, index) in [
        (by(None, Some(8192)), "capacity_context_users"),
        (by(Some("8K"), None), "capacity_label_users"),
        (by(Some("8K"), Some(8192)), "capacity_"),
    ] {
        for sort in [Sort::Users, Sort::Measured] {
            let filter = Filter { context: Some(context.clone()), ..Filter::default() };
            let (sql, binds) = list_statement(&ListQuery { filter, sort, ..ListQuery::default() });
            let explain = format!("EXPLAIN QUERY PLAN {sql}");
            let mut plan = sqlx::query_as::<_, (i64, i64, i64, String)>(&explain);
            for b in binds {
                plan = match b {
                    Bind::Text(t) => plan.bind(t),
                    Bind::Int(n) => plan.bind(n),
                };
            }
            let plan: Vec<String> = plan.fetch_all(&db.pool).await.unwrap().into_iter().map(|r| r.3).collect();
            assert!(plan.iter().any(|p| p.contains(index)), "{context:?} {sort:?}: {plan:?}");
            assert!(!plan.iter().any(|p| p == "SCAN capacity"), "{context:?} {sort:?}: {plan:?}");
        }
    }
    // and the list answers: 500 runs at 8K, each with its answer there only, by name or by tokens
    for context in [by(None, Some(8192)), by(Some("8K"), None)] {
        let q = ListQuery {
            filter: Filter { context: Some(context.clone()), ..Filter::default() },
            sort: Sort::Users,
            ..ListQuery::default()
        };
        let (runs, total) = db.list_runs(&q).await.unwrap();
        assert_eq!((total, runs.len()), (500, 25));
        let named = context.tokens.is_none();
        assert!(
            runs.iter().all(
                |r| r.capacity.len() == 1 + usize::from(named && r.gpu_count == 7) && r.capacity[0].context == 8192
            ),
            "{runs:?}"
        );
        // ranked by users, the run with two 8K answers is ranked at the shorter (8 users), not at 99
        let (top, _) = db.list_runs(&ListQuery { per_page: 1, ..q }).await.unwrap();
        assert_eq!((top[0].capacity[0].context, top[0].capacity[0].max_users), (8192, 8), "{top:?}");
    }
    db.close().await;
}

#[test]
fn migrations_split_into_statements() {
    let all = statements(MIGRATIONS[0].1);
    assert_eq!(all.len(), 9, "{all:#?}");
    assert!(all.iter().all(|s| s.starts_with("CREATE ")), "{all:#?}");
    let second = statements(MIGRATIONS[1].1);
    assert_eq!(second.len(), 2, "{second:#?}");
    let third = statements(MIGRATIONS[2].1);
    assert_eq!(third.len(), 2, "{third:#?}");
    let fourth = statements(MIGRATIONS[3].1);
    assert_eq!(fourth.len(), 5, "{fourth:#?}");
    let fifth = statements(MIGRATIONS[4].1);
    assert_eq!(fifth.len(), 2, "{fifth:#?}");
}
