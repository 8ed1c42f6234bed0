#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests.
#
#   scripts/pg.sh start DIR   initdb into DIR (which must not exist or be
#                             empty), start a server on a free loopback port,
#                             wait until it accepts connections, and print
#                             one line on stdout: its URL,
#                             postgres://duduclaw:duduclaw-test-pw@127.0.0.1:PORT/postgres
#                             The server offers TLS; its CA is DIR/ca.pem.
#   scripts/pg.sh stop DIR    stop that server at once and remove DIR
#
# The role `duduclaw` is a superuser with a password (scram-sha-256 over
# TCP), so the tests can create a database each and can check the password
# is never printed. Durability is off (fsync, synchronous_commit,
# full_page_writes): the data is thrown away anyway. The server refuses to
# run as root, so as root every server command runs as the `postgres` OS
# user. Everything but the URL goes to stderr; any failure exits non-zero
# saying what failed, with the tail of the server's log.
set -euo pipefail

PG_ROLE=duduclaw
PG_PASSWORD=duduclaw-test-pw
# runuser(1) is in /usr/sbin, which a root PATH may lack.
RUNUSER=$(command -v runuser 2>/dev/null || ls /usr/sbin/runuser /sbin/runuser 2>/dev/null | head -n 1 || true)

die() {
  echo "pg.sh: $*" >&2
  exit 1
}

usage() {
  echo "usage: scripts/pg.sh start DIR | scripts/pg.sh stop DIR" >&2
  exit 2
}

# initdb, pg_ctl, pg_isready: on PATH, else the newest Debian/Ubuntu install.
find_bin() {
  local name=$1 p
  if p=$(command -v "$name" 2>/dev/null); then
    echo "$p"
    return 0
  fi
  for p in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$p/$name" ]; then
      echo "$p/$name"
      return 0
    fi
  done
  die "$name not found (on PATH or in /usr/lib/postgresql/*/bin): install PostgreSQL, e.g. apt-get install postgresql"
}

# Runs a command as the server's OS user: `postgres` when we are root (the
# server refuses root), else ourselves. From / so that a working directory
# the postgres user cannot read does not matter.
as_pg() {
  if [ "$(id -u)" = 0 ]; then
    (cd / && "$RUNUSER" -u postgres -- "$@")
  else
    (cd / && "$@")
  fi
}

# The last lines of a log file, indented, for an error message.
log_tail() {
  local f=$1
  if [ -s "$f" ]; then
    echo "--- last lines of $f ---" >&2
    tail -n 30 "$f" | sed 's/^/  /' >&2
  fi
}

# A free TCP port on 127.0.0.1: asked of the kernel where python3 exists,
# else the first port from 55432 up that nothing listens on.
free_port() {
  local port
  if command -v python3 >/dev/null 2>&1 &&
    port=$(python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])' 2>/dev/null) && [ -n "$port" ]; then
    echo "$port"
    return 0
  fi
  for ((port = 55432 + RANDOM % 200; port < 56432; port++)); do
    if ! ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; then
      echo "$port"
      return 0
    fi
  done
  die "no free port found on 127.0.0.1 between 55432 and 56431"
}

start() {
  local dir=$1
  local initdb pg_ctl pg_isready
  initdb=$(find_bin initdb)
  pg_ctl=$(find_bin pg_ctl)
  pg_isready=$(find_bin pg_isready)

  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 ||
      die "running as root, but there is no 'postgres' OS user to run the server as (apt-get install postgresql creates it)"
    [ -n "$RUNUSER" ] || die "running as root, but runuser (util-linux) is missing"
  fi

  if [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
    die "$dir exists and is not empty: give a new folder (it is removed by 'pg.sh stop')"
  fi
  mkdir -p "$dir" || die "cannot create $dir"
  if [ "$(id -u)" = 0 ]; then
    chown postgres: "$dir" || die "cannot chown $dir to postgres"
    # The server's user must reach DIR: open up (search only) the folders
    # above it that we own and it cannot pass, e.g. a 0700 mktemp -d.
    local up
    up=$(dirname "$dir")
    while [ "$up" != / ]; do
      if ! "$RUNUSER" -u postgres -- test -x "$up" 2>/dev/null; then
        if [ "$(stat -c %u "$up")" = 0 ] && [ "$up" != /root ]; then
          chmod o+x "$up" || die "cannot make $up searchable for the postgres user"
        else
          die "the postgres user cannot reach $dir: $up is not searchable by it (choose a folder under /tmp)"
        fi
      fi
      up=$(dirname "$up")
    done
  fi
  chmod 700 "$dir"

  # The password goes to initdb in a file, never on a command line.
  local pwfile
  pwfile=$(mktemp)
  # shellcheck disable=SC2064
  trap "rm -f '$pwfile'" EXIT
  printf '%s\n' "$PG_PASSWORD" >"$pwfile"
  [ "$(id -u)" = 0 ] && chown postgres: "$pwfile"
  chmod 600 "$pwfile"

  local initlog="$dir/initdb.log"
  # initdb wants the folder to itself: write its log next to it first.
  local tmplog
  tmplog=$(mktemp)
  if ! as_pg "$initdb" -D "$dir" --username="$PG_ROLE" --pwfile="$pwfile" \
    --auth-host=scram-sha-256 --auth-local=trust --encoding=UTF8 --locale=C.UTF-8 \
    --no-sync >"$tmplog" 2>&1; then
    cat "$tmplog" >&2
    rm -f "$tmplog"
    die "initdb failed in $dir (output above)"
  fi
  cp "$tmplog" "$initlog" 2>/dev/null || true
  rm -f "$tmplog" "$pwfile"
  [ "$(id -u)" = 0 ] && chown postgres: "$initlog" 2>/dev/null || true

  tls "$dir"

  local log="$dir/server.log" port="" tries
  for tries in 1 2 3 4 5; do
    port=$(free_port)
    if as_pg "$pg_ctl" start -D "$dir" -l "$log" -w -t 60 -s \
      -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 -c ssl=on -c ssl_cert_file=server.crt -c ssl_key_file=server.key" \
      >&2; then
      break
    fi
    # Another process may have taken the port between our check and the
    # start: try another one, unless the log says something else.
    if ! grep -q "could not bind\|Address already in use" "$log" 2>/dev/null; then
      log_tail "$log"
      die "the server did not start (data folder $dir)"
    fi
    port=""
  done
  [ -n "$port" ] || {
    log_tail "$log"
    die "the server did not start after 5 ports were tried (data folder $dir)"
  }

  local ready=""
  for _ in $(seq 1 300); do
    if "$pg_isready" -q -h 127.0.0.1 -p "$port" -d postgres -U "$PG_ROLE" -t 1; then
      ready=1
      break
    fi
    sleep 0.1
  done
  if [ -z "$ready" ]; then
    log_tail "$log"
    as_pg "$pg_ctl" stop -D "$dir" -m immediate -s >/dev/null 2>&1 || true
    die "the server on 127.0.0.1:$port is not ready after 30 s (data folder $dir)"
  fi

  local url="postgres://$PG_ROLE:$PG_PASSWORD@127.0.0.1:$port/postgres"
  # Prove the URL works (password auth over TCP), where psql exists.
  if command -v psql >/dev/null 2>&1; then
    local out
    if ! out=$(psql "$url" -X -q -t -A -c 'SELECT 1' 2>&1) || [ "$out" != 1 ]; then
      echo "$out" >&2
      log_tail "$log"
      as_pg "$pg_ctl" stop -D "$dir" -m immediate -s >/dev/null 2>&1 || true
      die "the server runs on 127.0.0.1:$port but logging in as $PG_ROLE with the password failed"
    fi
  fi
  echo "$url"
}

# TLS as a managed server has it: a private CA (DIR/ca.pem, which the
# tests read) and a server certificate it signed, for the name "localhost"
# only, so that verify-full against 127.0.0.1 can be seen to check the
# name. The role duduclaw_tls_only may log in over TLS only: a client that
# gets in as it proves TLS was used.
tls() {
  local dir=$1
  command -v openssl >/dev/null 2>&1 ||
    die "openssl not found: the test server needs it for its TLS certificate (apt-get install openssl)"
  local ext
  ext=$(mktemp)
  printf '%s\n' "subjectAltName=DNS:localhost" "basicConstraints=CA:FALSE" \
    "keyUsage=digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" >"$ext"
  if ! {
    openssl req -x509 -newkey rsa:2048 -nodes -days 3 -subj "/CN=duduclaw test CA" \
      -keyout "$dir/ca.key" -out "$dir/ca.pem" &&
      openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
        -keyout "$dir/server.key" -out "$dir/server.csr" &&
      openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
        -CAcreateserial -days 3 -extfile "$ext" -out "$dir/server.crt"
  } >/dev/null 2>"$dir/tls.log"; then
    cat "$dir/tls.log" >&2
    rm -f "$ext"
    die "could not make the test server's TLS certificate (openssl output above)"
  fi
  rm -f "$ext" "$dir/server.csr" "$dir/ca.key"
  chmod 600 "$dir/server.key"
  chmod 644 "$dir/ca.pem" "$dir/server.crt"
  [ "$(id -u)" = 0 ] && chown postgres: "$dir/server.key" "$dir/server.crt" "$dir/ca.pem" "$dir/tls.log"
  # First match wins: this line goes above initdb's host lines.
  local hba="$dir/pg_hba.conf"
  { echo "hostnossl all duduclaw_tls_only all reject"; cat "$hba"; } >"$hba.new" && mv "$hba.new" "$hba"
  [ "$(id -u)" = 0 ] && chown postgres: "$hba"
  return 0
}

stop() {
  local dir=$1
  if [ ! -e "$dir" ]; then
    return 0
  fi
  # Never remove a folder that is not a data folder this script made.
  [ -f "$dir/PG_VERSION" ] || [ -z "$(ls -A "$dir" 2>/dev/null)" ] ||
    die "$dir is not a PostgreSQL data folder: not removing it"
  if [ -f "$dir/postmaster.pid" ]; then
    local pg_ctl
    pg_ctl=$(find_bin pg_ctl)
    if ! as_pg "$pg_ctl" stop -D "$dir" -m immediate -s >&2; then
      log_tail "$dir/server.log"
      echo "pg.sh: pg_ctl stop failed in $dir; removing the folder anyway" >&2
    fi
  fi
  rm -rf "$dir"
}

[ $# -eq 2 ] || usage
cmd=$1
dir=$(realpath -m -- "$2")
[ "$dir" != / ] || die "refusing to use / as the data folder"
case "$cmd" in
  start) start "$dir" ;;
  stop) stop "$dir" ;;
  *) usage ;;
esac
