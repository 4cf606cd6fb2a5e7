#!/usr/bin/env bash
# Throwaway PostgreSQL and MariaDB servers on loopback for the tests, from Debian's packages.
#
#   tests/db_servers.sh install        as root: install the server packages that are missing (and Prometheus)
#   tests/db_servers.sh run -- CMD...  start the servers the tests need, run CMD with their URLs, stop them
#   tests/db_servers.sh up | down      the same servers by hand; `up` prints the exports for a shell
#
# A server the caller already has wins: HMSREPL_TEST_POSTGRES_URL / HMSREPL_TEST_MYSQL_URL when set, else
# one answering on 127.0.0.1:5432 / 3306. Otherwise a server starts on a free loopback port, its data under
# var/throwaway-db/, and stops when CMD ends, whether CMD passed, failed or was interrupted. The servers trade
# durability for speed (no fsync): they hold nothing but test databases.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE=${HMSREPL_DB_STATE:-$ROOT/var/throwaway-db}
PG_DEBS=(postgresql)
MARIADB_DEBS=(mariadb-server mariadb-client)
# The other real servers the tests start on loopback: Prometheus (prometheus, promtool) scraping a metastore.
PEER_DEBS=(prometheus)

log() { echo "db_servers: $*" >&2; }
die() { log "$*"; exit 1; }

is_root() { [ "$(id -u)" = 0 ]; }

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }

answers() {  # answers PORT: something listens on 127.0.0.1:PORT
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

missing_debs() {
    local p
    for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done
}

install() {
    local missing
    missing=$(missing_debs "${PG_DEBS[@]}" "${MARIADB_DEBS[@]}" "${PEER_DEBS[@]}" | xargs)
    [ -z "$missing" ] && return 0
    is_root || die "missing Debian packages: $missing (run 'make setup' as root, or set HMSREPL_TEST_*_URL)"
    log "installing $missing"
    # Package scripts must not start system-wide servers on 5432/3306: those would then "already answer"
    # with their own authentication. A policy-rc.d that refuses every start is the Debian way to say so.
    local policy=/usr/sbin/policy-rc.d ours=""
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && ours=1
    fi
    apt-get update -qq -o Acquire::Retries=3
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o Acquire::Retries=3 --no-install-recommends $missing >/dev/null
    [ -n "$ours" ] && rm -f "$policy"
    return 0
}

# --- PostgreSQL -----------------------------------------------------------------------------------------

as_postgres() {  # PostgreSQL refuses to run as root: as root, run its tools as the postgres user
    if is_root; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi  # cd: the caller's cwd may be private
}

pg_dir() {  # the data's parent: var/throwaway-db/pg, or a private temporary one where postgres can't reach var/
    local dir=$STATE/pg
    mkdir -p "$dir"
    if is_root; then
        chown postgres "$dir"
        if ! runuser -u postgres -- test -w "$dir"; then
            dir=$(cat "$STATE/pg.where" 2>/dev/null || true)
            if [ -z "$dir" ] || [ ! -d "$dir" ]; then
                dir=$(mktemp -d /tmp/hmsrepl-pg.XXXXXX)
                chown postgres "$dir"
                echo "$dir" >"$STATE/pg.where"
            fi
        fi
    fi
    echo "$dir"
}

pg_up() {
    local bin dir port
    bin=$(pg_bin)
    [ -n "$bin" ] || die "PostgreSQL server binaries not found: run 'make setup' as root (installs ${PG_DEBS[*]})"
    dir=$(pg_dir)
    port=$(free_port)
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        # UTF-8 whatever the caller's locale: without LANG initdb makes a SQL_ASCII cluster, whose text
        # psycopg returns as bytes (every connection failed, on reading the server's version).
        as_postgres "$bin/initdb" --no-sync -D "$dir/data" -A trust -U postgres --encoding=UTF8 \
            --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
            || { tail -20 "$dir/initdb.log" >&2; die "initdb failed (log: $dir/initdb.log)"; }
    fi
    as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 \
        -o "-p $port -c listen_addresses=127.0.0.1 -k $dir -c max_connections=300 -c fsync=off \
            -c synchronous_commit=off -c full_page_writes=off" start >/dev/null \
        || { tail -20 "$dir/log" >&2; die "PostgreSQL did not start (log: $dir/log)"; }
    echo "$port" >"$STATE/pg.port"
    log "PostgreSQL $(basename "$(dirname "$bin")") on 127.0.0.1:$port (data: $dir/data)"
    echo "postgresql+psycopg://postgres@127.0.0.1:$port/postgres"
}

pg_down() {
    local bin dir
    [ -f "$STATE/pg.port" ] || return 0
    bin=$(pg_bin)
    dir=$(pg_dir)
    as_postgres "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null || true
    rm -f "$STATE/pg.port"
    log "PostgreSQL stopped"
}

# --- MariaDB --------------------------------------------------------------------------------------------

maria_up() {
    local dir=$STATE/mariadb port user
    command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] \
        || die "MariaDB server not found: run 'make setup' as root (installs ${MARIADB_DEBS[*]})"
    mkdir -p "$dir"
    user=$(id -un)  # mariadbd runs as root only when told so; the data stays the caller's
    if [ ! -d "$dir/data/mysql" ]; then
        mariadb-install-db --no-defaults --datadir="$dir/data" --user="$user" \
            --auth-root-authentication-method=normal --skip-test-db >"$dir/install.log" 2>&1 \
            || { tail -20 "$dir/install.log" >&2; die "mariadb-install-db failed (log: $dir/install.log)"; }
    fi
    port=$(free_port)
    rm -f "$dir/mysqld.sock"
    setsid /usr/sbin/mariadbd --no-defaults --datadir="$dir/data" --user="$user" --port="$port" \
        --bind-address=127.0.0.1 --socket="$dir/mysqld.sock" --pid-file="$dir/mysqld.pid" \
        --log-error="$dir/error.log" --skip-name-resolve --max-connections=300 \
        --innodb-flush-log-at-trx-commit=0 --sync-binlog=0 --character-set-server=utf8mb4 \
        --collation-server=utf8mb4_bin </dev/null >/dev/null 2>&1 &
    local i
    for i in $(seq 1 120); do
        mariadb-admin --no-defaults --socket="$dir/mysqld.sock" -uroot ping >/dev/null 2>&1 && break
        [ "$i" = 120 ] && { tail -20 "$dir/error.log" >&2; die "MariaDB did not start (log: $dir/error.log)"; }
        sleep 0.5
    done
    mariadb --no-defaults --socket="$dir/mysqld.sock" -uroot -e "CREATE DATABASE IF NOT EXISTS test"
    echo "$port" >"$STATE/mariadb.port"
    log "MariaDB $(mariadbd --version | awk '{print $3}') on 127.0.0.1:$port (data: $dir/data)"
    echo "mysql+mysqldb://root@127.0.0.1:$port/test"
}

maria_down() {
    local dir=$STATE/mariadb pid
    [ -f "$STATE/mariadb.port" ] || return 0
    mariadb-admin --no-defaults --socket="$dir/mysqld.sock" -uroot shutdown >/dev/null 2>&1 || {
        pid=$(cat "$dir/mysqld.pid" 2>/dev/null || true)
        [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    }
    for _ in $(seq 1 60); do [ -e "$dir/mysqld.pid" ] || break; sleep 0.5; done
    rm -f "$STATE/mariadb.port"
    log "MariaDB stopped"
}

# --- what the tests get ---------------------------------------------------------------------------------

running() {  # running NAME: the port of this checkout's throwaway NAME server, if it still answers
    local port
    port=$(cat "$STATE/$1.port" 2>/dev/null) || return 1
    answers "$port" && echo "$port"
}

STARTED=()  # the servers this call started: the only ones `run` stops

up() {  # start what is needed; export the URLs into this shell
    mkdir -p "$STATE"
    use_or_start HMSREPL_TEST_POSTGRES_URL PostgreSQL 5432 pg pg_up "postgresql+psycopg://postgres@127.0.0.1:%s/postgres"
    use_or_start HMSREPL_TEST_MYSQL_URL MariaDB 3306 mariadb maria_up "mysql+mysqldb://root@127.0.0.1:%s/test"
}

# use_or_start VAR LABEL DEFAULT_PORT NAME START URL_FORMAT: the URL in VAR if set, else a server on the
# default port (the tests' default URLs), else this checkout's running NAME server, else a new one (START).
use_or_start() {
    local var=$1 label=$2 default_port=$3 name=$4 start=$5 url_format=$6 port url
    [ -z "${!var:-}" ] || return 0
    if answers "$default_port"; then
        log "$label: using the server on 127.0.0.1:$default_port"
    elif port=$(running "$name"); then
        log "$label: using this checkout's running server on 127.0.0.1:$port"
        # shellcheck disable=SC2059  # the format is ours
        export "$var=$(printf "$url_format" "$port")"
    else
        url=$("$start")
        export "$var=$url"
        STARTED+=("$name")
    fi
}

down() {
    maria_down
    pg_down
}

stop_started() {
    local name
    for name in "${STARTED[@]}"; do
        if [ "$name" = pg ]; then pg_down; else maria_down; fi
    done
}

run() {
    [ "${1:-}" = "--" ] && shift
    [ $# -gt 0 ] || die "usage: $0 run -- COMMAND [ARG...]"
    trap stop_started EXIT
    trap 'exit 130' INT TERM
    up
    local rc=0
    "$@" || rc=$?
    return "$rc"
}

case "${1:-}" in
    install) install ;;
    run) shift; run "$@" ;;
    up)
        up
        if [ -n "${HMSREPL_TEST_POSTGRES_URL:-}" ]; then echo "export HMSREPL_TEST_POSTGRES_URL=$HMSREPL_TEST_POSTGRES_URL"; fi
        if [ -n "${HMSREPL_TEST_MYSQL_URL:-}" ]; then echo "export HMSREPL_TEST_MYSQL_URL=$HMSREPL_TEST_MYSQL_URL"; fi
        ;;
    down) down ;;
    *) die "usage: $0 install | run -- COMMAND [ARG...] | up | down" ;;
esac
