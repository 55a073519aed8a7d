# shellcheck shell=bash
# A throwaway PostgreSQL for the scale-out tests. Source it, then call the functions:
#
#   source .ci/postgres.sh
#   postgres_install   # apt-get install postgresql when initdb is missing (needs root or sudo)
#   postgres_start     # initdb + start on 127.0.0.1:<free port>, export GATED_PARENT_POSTGRES_URL,
#                      # and chain postgres_stop onto the shell's EXIT trap (exit status kept)
#   postgres_stop      # stop the server and remove its files (idempotent)
#
# `postgres_up` does install + start. Locally: `source .ci/postgres.sh && postgres_up`, then
# run pytest in the same shell. The cluster lives in its own temporary folder, trusts local
# connections only, listens on 127.0.0.1 only, and is stopped when the shell exits.

_gp_pg_work=""

_gp_as_postgres() {
    # initdb and postgres refuse to run as root: run them as the postgres user then.
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

_gp_pg_bin() {
    # Debian keeps the server binaries off PATH, under /usr/lib/postgresql/<version>/bin.
    local found
    found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    if [ -n "$found" ] && ! command -v initdb >/dev/null; then
        export PATH="$found:$PATH"
    fi
}

postgres_install() {
    _gp_pg_bin
    if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
        return 0
    fi
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
        postgresql >/dev/null
    _gp_pg_bin
    command -v initdb >/dev/null || { echo "postgres.sh: initdb not found after install" >&2; return 1; }
}

postgres_start() {
    _gp_pg_bin
    _gp_pg_work=$(mktemp -d /tmp/gated-parent-pg.XXXXXX)
    if [ "$(id -u)" = 0 ]; then
        id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
        chown postgres "$_gp_pg_work"
    fi
    _gp_as_postgres initdb -D "$_gp_pg_work/data" -U postgres --auth=trust -E UTF8 >/dev/null
    local port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    _gp_as_postgres pg_ctl -D "$_gp_pg_work/data" -l "$_gp_pg_work/postgres.log" -w -t 60 \
        -o "-h 127.0.0.1 -p $port -k $_gp_pg_work" start >/dev/null
    export GATED_PARENT_POSTGRES_URL="postgresql+psycopg://postgres@127.0.0.1:$port/postgres"
    # Run postgres_stop first on exit, then whatever EXIT trap was there, with $? kept for it
    # (set +e: under errexit the `(exit N)` that restores $? would end the trap early).
    local previous
    previous=$(trap -p EXIT | sed -E "s/^trap -- '(.*)' EXIT$/\\1/")
    # shellcheck disable=SC2064
    trap "_gp_status=\$?; set +e; postgres_stop; (exit \$_gp_status); ${previous}" EXIT
    echo "PostgreSQL on 127.0.0.1:$port (GATED_PARENT_POSTGRES_URL exported)"
}

postgres_stop() {
    if [ -n "$_gp_pg_work" ] && [ -d "$_gp_pg_work/data" ]; then
        _gp_as_postgres pg_ctl -D "$_gp_pg_work/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
    [ -n "$_gp_pg_work" ] && rm -rf "$_gp_pg_work"
    _gp_pg_work=""
    return 0
}

postgres_up() {
    postgres_install && postgres_start
}
