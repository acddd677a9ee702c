//! `speedmatrix serve` as a child process, shared by the site's test binaries.

#[allow(dead_code)]
pub mod site;

use std::process::{Command, Stdio};
use std::time::Duration;

/// Kills the server however the test ends.
pub struct Server(std::process::Child);
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `speedmatrix serve --db DB` on a free loopback port, and its address (`host:port`).
pub async fn serve(db: &str) -> (Server, String) {
    serve_with(db, &[]).await
}

/// `serve` with more flags (`--header-timeout 1s`, …).
#[allow(dead_code)]
pub async fn serve_with(db: &str, flags: &[&str]) -> (Server, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_speedmatrix"))
        .args(["serve", "--db", db, "--listen", "127.0.0.1:0"])
        .args(flags)
        .env_remove("SPEEDMATRIX_DB")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("serve starts");
    let stdout = child.stdout.take().unwrap();
    let server = Server(child);
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).map(|_| line)
    });
    let line =
        tokio::time::timeout(Duration::from_secs(60), line).await.expect("serve prints its address").unwrap().unwrap();
    let addr = line.split("http://").nth(1).expect("an address").trim().trim_end_matches('/').to_string();
    (server, addr)
}

/// The PostgreSQL database `SPEEDMATRIX_TEST_POSTGRES` names, held for one suite at a time: the
/// suites compare every row of the database before and after a refused upload, so another
/// suite writing meanwhile would fail them. `None` (the suite skipped) without the variable,
/// except under CI=true, where it must be set.
#[allow(dead_code)]
pub async fn postgres() -> Option<(String, tokio::sync::MutexGuard<'static, ()>)> {
    static ONE_SUITE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    match std::env::var("SPEEDMATRIX_TEST_POSTGRES") {
        Ok(url) if !url.trim().is_empty() => Some((url.trim().to_string(), ONE_SUITE.lock().await)),
        _ if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("CI=true but SPEEDMATRIX_TEST_POSTGRES is not set: run scripts/postgres-test.sh")
        }
        _ => {
            eprintln!("skipped: set SPEEDMATRIX_TEST_POSTGRES=postgres://… (scripts/postgres-test.sh does)");
            None
        }
    }
}
