#!/usr/bin/env bash
# Runs the results site's tests against PostgreSQL (the site also runs on SQLite, which needs no
# setup; this script gives the PostgreSQL side a real server).
#
# Installs Debian's postgresql when it is missing, starts a private cluster in
# .work/pg (as the postgres user when run as root) on a free loopback port,
# creates a database, runs a command with SPEEDMATRIX_TEST_POSTGRES pointing at
# it, and stops the cluster on every way out.
#
#   scripts/postgres-test.sh                         the site's tests: cargo test -p sm-site, then the
#                                                    HTTP suites against a `speedmatrix serve` process
#                                                    (cargo test -p speedmatrix --test cli -- site_http::
#                                                    site_capacity:: site_compare::)
#   scripts/postgres-test.sh cargo test --workspace  any command, with the variable set
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib.sh
source scripts/lib.sh
PG=$PWD/.work/pg

if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    apt_install postgresql || lib_die "could not install postgresql with apt-get"
fi
BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)

# initdb and postgres refuse to run as root
AS=()
if [ "$(id -u)" -eq 0 ]; then
    AS=(runuser -u postgres --)
fi

stop() {
    if [ -f "$PG/data/postmaster.pid" ]; then
        "${AS[@]}" "$BIN/pg_ctl" -D "$PG/data" -m fast -w -t 30 stop >/dev/null 2>&1 || true
    fi
}
trap stop EXIT
trap 'exit 130' INT TERM

stop # a cluster left by an earlier run that was killed
rm -rf "$PG"
mkdir -p "$PG"
[ "$(id -u)" -ne 0 ] || chown postgres: "$PG"

PORT=$(free_port)
"${AS[@]}" "$BIN/initdb" -D "$PG/data" -U postgres -A trust -E UTF8 --no-sync >"$PG/initdb.log" 2>&1 || {
    echo "postgres-test: FAIL: initdb failed; see $PG/initdb.log" >&2
    tail -20 "$PG/initdb.log" >&2
    exit 1
}
# bounded: pg_ctl -w gives up after -t seconds
if ! "${AS[@]}" "$BIN/pg_ctl" -D "$PG/data" -l "$PG/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $PORT -k $PG -c fsync=off -c synchronous_commit=off" start >/dev/null; then
    echo "postgres-test: FAIL: the cluster did not start; see $PG/server.log" >&2
    tail -20 "$PG/server.log" >&2
    exit 1
fi
"${AS[@]}" "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres speedmatrix_test

export SPEEDMATRIX_TEST_POSTGRES="postgres://postgres@127.0.0.1:$PORT/speedmatrix_test?sslmode=disable"
echo "postgres-test: PostgreSQL $("$BIN/postgres" --version | awk '{print $3}') at 127.0.0.1:$PORT"
if [ $# -eq 0 ]; then
    cargo test -p sm-site
    cargo test -p speedmatrix --test cli -- site_http:: site_capacity:: site_compare::
else
    "$@"
fi
