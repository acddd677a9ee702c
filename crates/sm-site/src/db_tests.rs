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
    let (clause, binds, count) = where_clause(&f);
    assert_eq!(
        clause,
        " WHERE LOWER(model) LIKE $1 ESCAPE '\\' AND engine_version = $2 AND measured_at >= $3 \
         AND measured_at < $4 AND gpu_count = $5"
    );
    assert_eq!(binds, ["%m%", "0.27.2", "2026-01-01", "2026-02-01"]);
    assert_eq!(count, Some(2));
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
        let (clause, binds, count) = where_clause(&filter);
        let sql = format!("EXPLAIN QUERY PLAN SELECT id FROM runs{clause}");
        let mut q = sqlx::query_as::<_, (i64, i64, i64, String)>(&sql);
        for b in binds {
            q = q.bind(b);
        }
        if let Some(c) = count {
            q = q.bind(c);
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
    sqlx::query("ANALYZE").execute(&db.pool).await.unwrap();
    for sort in [Sort::Users, Sort::Measured] {
        let q = ListQuery { filter: Filter { context: Some(8192), ..Filter::default() }, sort, ..ListQuery::default() };
        let (sql, texts, numbers) = list_statement(&q);
        let explain = format!("EXPLAIN QUERY PLAN {sql}");
        let mut plan = sqlx::query_as::<_, (i64, i64, i64, String)>(&explain);
        for t in texts {
            plan = plan.bind(t);
        }
        for n in numbers {
            plan = plan.bind(n);
        }
        let plan: Vec<String> = plan.fetch_all(&db.pool).await.unwrap().into_iter().map(|r| r.3).collect();
        assert!(plan.iter().any(|p| p.contains("capacity_context_users")), "{sort:?}: {plan:?}");
        assert!(!plan.iter().any(|p| p == "SCAN capacity"), "{sort:?}: {plan:?}");
    }
    // and the list answers: 500 runs at 8K, each with its answer there only
    let q = ListQuery {
        filter: Filter { context: Some(8192), ..Filter::default() },
        sort: Sort::Users,
        ..ListQuery::default()
    };
    let (runs, total) = db.list_runs(&q).await.unwrap();
    assert_eq!((total, runs.len()), (500, 25));
    assert!(runs.iter().all(|r| r.capacity.len() == 1 && r.capacity[0].context == 8192), "{runs:?}");
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
}
