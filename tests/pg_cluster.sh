#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the fleet tests: loopback only, in a temporary directory.
#
#   eval "$(tests/pg_cluster.sh start)"     # exports PLACETUNE_TEST_PG_URL and PLACETUNE_TEST_PG_DIR
#   ...run the tests...
#   tests/pg_cluster.sh stop "$PLACETUNE_TEST_PG_DIR"
#
# start: installs Debian's postgresql package when no server binaries are found (apt-get,
# needs root), runs initdb as a non-root user (initdb refuses root: as root the cluster
# belongs to the `postgres` user), listens on 127.0.0.1 only on a free port, with a random
# password (scram-sha-256) and durability off (fsync=off: a test cluster, never data).
# Everything it prints on stdout is shell to eval; progress goes to stderr.
set -eEuo pipefail

log() { echo "pg_cluster: $*" >&2; }

find_bindir() {
    local d
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && { echo "$d"; return 0; }
    done
    if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
        dirname "$(command -v pg_ctl)"
        return 0
    fi
    return 1
}

install_postgres() {
    if [ "$(id -u)" -ne 0 ]; then
        log "no PostgreSQL server binaries and not root: install the postgresql package (apt-get install postgresql)"
        exit 1
    fi
    log "installing PostgreSQL from Debian packages (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    # the package's own cluster is not needed: only its binaries are used
    apt-get install -y -qq --no-install-recommends postgresql >&2
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

as_owner() {  # run a command as the cluster owner
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u "$OWNER" -- "$@"
    else
        "$@"
    fi
}

cmd_start() {
    local bindir
    bindir=$(find_bindir) || { install_postgres; bindir=$(find_bindir); }
    if [ "$(id -u)" -eq 0 ]; then
        OWNER=postgres
        id "$OWNER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$OWNER"
    else
        OWNER=$(id -un)
    fi
    local dir port pw
    dir=$(mktemp -d "${TMPDIR:-/tmp}/placetune-pg.XXXXXX")
    # on any failure from here: stop what was started and remove the directory
    trap 'log "start failed"; cmd_stop "$dir" >/dev/null 2>&1 || true' ERR
    chmod 700 "$dir"
    pw=$(python3 -c 'import secrets; print(secrets.token_hex(12))')
    printf '%s\n' "$pw" > "$dir/pwfile"
    [ "$(id -u)" -eq 0 ] && chown -R "$OWNER" "$dir"
    as_owner "$bindir/initdb" -D "$dir/data" -U placetune --pwfile="$dir/pwfile" -E UTF8 --no-sync \
        --auth-local=trust --auth-host=scram-sha-256 >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    rm -f "$dir/pwfile"
    local tries=0
    while :; do
        port=$(free_port)
        if as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
            -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$dir -c fsync=off \
                -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 \
                -c shared_buffers=32MB" start >&2; then
            break
        fi
        tries=$((tries + 1))
        [ "$tries" -ge 3 ] && { cat "$dir/server.log" >&2; exit 1; }
    done
    as_owner "$bindir/createdb" -h "$dir" -p "$port" -U placetune placetune
    log "PostgreSQL $("$bindir/pg_ctl" --version | awk '{print $3}') on 127.0.0.1:$port in $dir"
    # a libpq password file as well, for tests of password-less URLs (PGPASSFILE)
    printf '127.0.0.1:%s:*:placetune:%s\n' "$port" "$pw" > "$dir/pgpass"
    chmod 600 "$dir/pgpass"
    echo "export PLACETUNE_TEST_PG_URL='postgresql+psycopg://placetune:$pw@127.0.0.1:$port/placetune'"
    echo "export PLACETUNE_TEST_PG_PASSFILE='$dir/pgpass'"
    echo "export PLACETUNE_TEST_PG_DIR='$dir'"
}

cmd_stop() {
    local dir=${1:-${PLACETUNE_TEST_PG_DIR:-}}
    [ -n "$dir" ] && [ -d "$dir" ] || return 0
    case "$dir" in */placetune-pg.*) ;; *) log "refusing to remove $dir"; exit 1 ;; esac
    local bindir
    bindir=$(find_bindir) || true
    if [ -n "$bindir" ] && [ -f "$dir/data/postmaster.pid" ]; then
        if [ "$(id -u)" -eq 0 ]; then OWNER=$(stat -c %U "$dir/data"); else OWNER=$(id -un); fi
        as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >&2 || true
    fi
    rm -rf "$dir"
    log "stopped and removed $dir"
}

case "${1:-}" in
    start) cmd_start ;;
    stop) shift; cmd_stop "${1:-}" ;;
    *) echo "usage: $0 start | stop [DIR]" >&2; exit 2 ;;
esac
