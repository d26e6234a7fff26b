#!/usr/bin/env bash
# A throwaway PostgreSQL cluster (and a PgBouncer in transaction mode in front of it) for tests.
#
#   eval "$(.ci/postgres.sh start [DIR])"   # prints export lines: PLAIT_TEST_POSTGRES_URL,
#                                           # PLAIT_TEST_PGBOUNCER_URL (if pgbouncer is installed),
#                                           # PLAIT_TEST_POSTGRES_DIR
#   .ci/postgres.sh restart [DIR]           # drop every connection (fault tests)
#   .ci/postgres.sh stop [DIR]
#
# Debian's postgresql package (and optionally pgbouncer) must be installed. initdb refuses to run
# as root, so as root the cluster runs as the `postgres` user. fsync=off: the data is thrown away.
set -euo pipefail

cmd="${1:-}"
dir="${2:-${PLAIT_TEST_POSTGRES_DIR:-/tmp/plait-postgres}}"

bindir() {
  local d
  d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)"
  if [ -z "$d" ] && command -v pg_config >/dev/null; then d="$(pg_config --bindir)"; fi
  if [ -z "$d" ] || [ ! -x "$d/initdb" ]; then
    echo "postgres.sh: no initdb found; install PostgreSQL (apt-get install -y postgresql)" >&2
    exit 1
  fi
  echo "$d"
}

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

start() {
  local bin port bport
  bin="$(bindir)"
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres "$dir"
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_owner "$bin/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --locale=C.UTF-8 \
      --no-sync >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
  fi
  port="$(free_port)"
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
    -o "-k $dir -p $port -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=200" \
    >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
  echo "$port" >"$dir/port"
  echo "export PLAIT_TEST_POSTGRES_URL=postgresql://postgres@127.0.0.1:$port/postgres"
  echo "export PLAIT_TEST_POSTGRES_DIR=$dir"
  if command -v pgbouncer >/dev/null; then
    bport="$(free_port)"
    cat >"$dir/pgbouncer.ini" <<INI
[databases]
postgres = host=127.0.0.1 port=$port dbname=postgres user=postgres
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bport
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
max_client_conn = 200
default_pool_size = 10
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
ignore_startup_parameters = extra_float_digits,options
INI
    echo '"postgres" ""' >"$dir/userlist.txt"
    [ "$(id -u)" = 0 ] && chown postgres "$dir/pgbouncer.ini" "$dir/userlist.txt"
    as_owner pgbouncer -d "$dir/pgbouncer.ini" >/dev/null
    echo "export PLAIT_TEST_PGBOUNCER_URL=postgresql://postgres@127.0.0.1:$bport/postgres"
  fi
}

stop() {
  local bin
  bin="$(bindir)"
  if [ -f "$dir/pgbouncer.pid" ]; then
    kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true
  fi
  if [ -f "$dir/data/postmaster.pid" ]; then
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null || true
  fi
  rm -rf "$dir"
}

restart() {
  # Restarts the server (every connection is dropped) on the same port; used by fault tests.
  as_owner "$(bindir)/pg_ctl" -D "$dir/data" -l "$dir/server.log" -m immediate -w -t 60 restart \
    >/dev/null
}

case "$cmd" in
  start) start ;;
  restart) restart ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop|restart [DIR]" >&2; exit 2 ;;
esac
