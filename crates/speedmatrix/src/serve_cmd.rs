//! `speedmatrix serve`: the results site, and its upload tokens.

use std::io::Write;
use std::process::ExitCode;

use std::time::Duration;

use clap::{Args, Subcommand};

/// A duration above zero: a zero timeout would refuse every request.
fn positive_duration(s: &str) -> Result<Duration, String> {
    match sm_core::units::parse_duration(s) {
        Ok(d) if d.is_zero() => Err("must be above zero, e.g. 10s".into()),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Database: an SQLite file (created and migrated on first start) or postgres://user@host/db.
    #[arg(long, env = "SPEEDMATRIX_DB", default_value = sm_site::DEFAULT_DB, global = true)]
    db: String,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: String,
    /// Connections served at once; more wait until one ends.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    max_connections: u32,
    /// How long a request's head may take to arrive; also how long a connection may sit idle.
    #[arg(long, default_value = "10s", value_parser = positive_duration)]
    header_timeout: Duration,
    /// How long a whole request may take, its body included (an upload must arrive within it).
    #[arg(long, default_value = "120s", value_parser = positive_duration)]
    request_timeout: Duration,
    #[command(subcommand)]
    command: Option<ServeCommand>,
}

#[derive(Debug, Subcommand)]
enum ServeCommand {
    /// Manage upload tokens (only their hashes are stored).
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Create a token and print it once; uploads made with it are "by @NAME".
    Create {
        /// The token's name, shown as the uploader (by @NAME): 1–64 letters, digits, '.', '_' or '-'.
        /// A name has one live token at a time; a revoked name can be given a new one.
        #[arg(long)]
        name: String,
    },
    /// List tokens: name, created, revoked.
    List,
    /// Revoke the live token of NAME.
    Revoke { name: String },
}

async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

pub async fn main(args: ServeArgs) -> ExitCode {
    let db = match sm_site::Db::connect(&args.db).await {
        Ok(db) => db,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let code = match args.command {
        Some(ServeCommand::Token { command }) => token(&db, command).await,
        None => {
            let limits = sm_site::Limits {
                max_connections: args.max_connections as usize,
                header_timeout: args.header_timeout,
                request_timeout: args.request_timeout,
            };
            serve(db.clone(), &args.listen, limits).await
        }
    };
    db.close().await;
    code
}

async fn serve(db: sm_site::Db, listen: &str, limits: sm_site::Limits) -> ExitCode {
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen on {listen}: {e}");
            return ExitCode::from(1);
        }
    };
    let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_else(|_| listen.to_string());
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "speedmatrix serve: the results site is at http://{addr}/");
    let _ = out.flush();
    drop(out);
    match sm_site::serve(db, listener, limits, stop_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: the site stopped: {e}");
            ExitCode::from(1)
        }
    }
}

async fn token(db: &sm_site::Db, command: TokenCommand) -> ExitCode {
    match command {
        TokenCommand::Create { name } => match sm_site::tokens::create(db, &name).await {
            Ok(token) => {
                println!("{token}");
                eprintln!("token \"{name}\" created: it is shown only now; uploads with it are by @{name}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        },
        TokenCommand::List => match db.list_tokens().await {
            Ok(tokens) => {
                println!("{:<24} {:<22} revoked", "name", "created");
                for t in tokens {
                    println!("{:<24} {:<22} {}", t.name, t.created_at, t.revoked_at.as_deref().unwrap_or("-"));
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        },
        TokenCommand::Revoke { name } => match db.revoke_token(&name).await {
            Ok(true) => {
                eprintln!("token \"{name}\" revoked");
                ExitCode::SUCCESS
            }
            Ok(false) => {
                eprintln!("error: no live token named \"{name}\"");
                ExitCode::from(1)
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        },
    }
}
