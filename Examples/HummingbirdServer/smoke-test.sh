#!/usr/bin/env bash
# Smoke test of the Hummingbird example, run by .ci/run after `swift test`:
#   1. builds the example (debug);
#   2. starts a throwaway PostgreSQL in a temporary folder (as the unprivileged
#      `postgres` account when run as root: PostgreSQL refuses root);
#   3. runs two instances of the server on two ports against one database;
#   4. checks that a write through one shows in the other's list and in the other's
#      server-sent-event stream (/events), and that posts and the import work;
#   5. SIGTERMs one instance while four curl loops write through it, and checks that it
#      exits 0, that every write acknowledged with 2xx is in the table, and that every
#      stored write reached the other instance's event stream; then the other instance,
#      idle, exits 0 on SIGTERM too.
# Uses bash, curl and psql only. Everything it starts is stopped and removed on exit.
#   Examples/HummingbirdServer/smoke-test.sh            build, then test
#   SMOKE_SKIP_BUILD=1 Examples/HummingbirdServer/smoke-test.sh   test the last build
#   SMOKE_KEEP=1 …                                       keep the folder with the logs
set -euo pipefail
cd "$(dirname "$0")"
started=$SECONDS
work=

say() { echo "smoke-test: $*"; }
die() {
    echo "smoke-test: FAILED: $*" >&2
    for log in "$work"/*.log; do
        [ -f "$log" ] || continue
        echo "--- $log (last 30 lines)" >&2
        tail -n 30 "$log" >&2
    done
    exit 1
}

if [ "${SMOKE_SKIP_BUILD:-0}" != 1 ]; then
    build_start=$SECONDS
    swift build --product HummingbirdServer
    say "built in $((SECONDS - build_start)) s"
fi
server=$(swift build --show-bin-path)/HummingbirdServer
[ -x "$server" ] || { echo "smoke-test: no $server (build first)" >&2; exit 1; }

pgbin=$(compgen -G "/usr/lib/postgresql/*/bin/initdb" | sort -V | tail -n 1 | xargs dirname)
work=$(mktemp -d /tmp/pgdatakit-smoke.XXXXXX)
chmod 755 "$work"
as_server() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
if [ "$(id -u)" -eq 0 ]; then chown postgres: "$work"; fi

pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    if [ -f "$work/data/postmaster.pid" ]; then
        as_server "$pgbin/pg_ctl" -D "$work/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    if [ "${SMOKE_KEEP:-0}" = 1 ]; then echo "smoke-test: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

# A free TCP port on 127.0.0.1 (nothing answers on it).
free_port() {
    local port
    while true; do
        port=$((20000 + RANDOM % 20000))
        if ! (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return; fi
    done
}

pgport=$(free_port)
as_server "$pgbin/initdb" -D "$work/data" -U postgres -A trust -E UTF8 --no-sync >"$work/initdb.log" 2>&1 \
    || die "initdb failed"
as_server "$pgbin/pg_ctl" -D "$work/data" -l "$work/postgres.log" -w \
    -o "-p $pgport -k $work -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60" start >/dev/null \
    || die "PostgreSQL did not start"
psql_do() { "$pgbin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pgport" -U postgres "$@"; }
psql_do -d postgres -c "CREATE DATABASE smoke"
export DATABASE_URL="postgres://postgres@127.0.0.1:$pgport/smoke"
say "PostgreSQL on port $pgport"

# Starts an instance on a free port; sets `port` and `pid`.
start_server() {
    local name=$1
    port=$(free_port)
    "$server" "$port" >"$work/$name.log" 2>&1 &
    pid=$!
    pids+=("$pid")
    local deadline=$((SECONDS + 60))
    until curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; do
        kill -0 "$pid" 2>/dev/null || die "$name exited while starting"
        [ $SECONDS -lt $deadline ] || die "$name did not answer within 60 s"
        sleep 0.1
    done
    say "$name listening on port $port (pid $pid)"
}
# The first instance creates the tables; the second finds them.
start_server a
port_a=$port pid_a=$pid
start_server b
port_b=$port pid_b=$pid
a=http://127.0.0.1:$port_a
b=http://127.0.0.1:$port_b

# Waits until `file` contains `text` (a fixed string), or fails after 20 s.
wait_for() {
    local file=$1 text=$2 what=$3
    local deadline=$((SECONDS + 20))
    until grep -qF -- "$text" "$file" 2>/dev/null; do
        [ $SECONDS -lt $deadline ] || die "$what: no '$text' in $file within 20 s"
        sleep 0.1
    done
}
json() { curl -sf -H 'content-type: application/json' "$@"; }

# 1. A write through a shows in b's list and in b's event stream.
curl -sN "$b/events" >"$work/events-b.txt" 2>/dev/null &
events_pid=$!
pids+=("$events_pid")
wait_for "$work/events-b.txt" ": listening" "b's event stream"
created=$(json -X POST -d '{"userID":"smoke-1","name":"Ada","age":36}' "$a/users") || die "POST /users through a failed"
id=$(sed -n 's/.*"id":\([0-9]*\).*/\1/p' <<<"$created")
[ -n "$id" ] || die "POST /users answered $created"
curl -sf "$b/users" | grep -qF '"userID":"smoke-1"' || die "b's list lacks the user written through a"
wait_for "$work/events-b.txt" "\"User/$id\"" "b's event stream"
say "a write through a is in b's list and b's event stream"

json -X PATCH -d '{"name":"Ada Lovelace"}' "$a/users/smoke-1" >/dev/null || die "PATCH /users through a failed"
curl -sf "$b/users" | grep -qF '"name":"Ada Lovelace"' || die "b's list lacks the update through a"
json -X POST -d '{"postID":"p-1","title":"Hello","userID":"smoke-1"}' "$b/posts" >/dev/null || die "POST /posts through b failed"
json -X PATCH -d '{"title":"Hello again"}' "$b/posts/p-1" >/dev/null || die "PATCH /posts through b failed"
posts=$(curl -sf "$a/posts") || die "GET /posts through a failed"
grep -qF '"title":"Hello again"' <<<"$posts" && grep -qF '"userID":"smoke-1"' <<<"$posts" \
    || die "a's list lacks the post written through b: $posts"
code=$(json -o /dev/null -w '%{http_code}' -X POST -d '{"userID":"smoke-1"}' "$a/users" || true)
[ "$code" = 409 ] || die "a second POST of smoke-1 answered $code, not 409"
imported=$(json -X POST -d '[{"userID":"imp-1","name":"One"},{"userID":"imp-2"},{"userID":"smoke-1","age":37}]' "$a/import/users") \
    || die "POST /import/users failed"
grep -qF '"records":3' <<<"$imported" || die "import answered $imported"
curl -sf "$b/users" | grep -qF '"userID":"imp-2"' || die "b's list lacks the imported users"
say "updates, posts, conflicts and the import agree across both instances"

# Sends SIGTERM to a server and sets `status` to its exit status; one that has not exited
# 30 s later is killed (status 137).
terminate() {
    local pid=$1 watchdog
    (sleep 30 && kill -KILL "$pid" 2>/dev/null) &
    watchdog=$!
    kill -TERM "$pid"
    status=0
    wait "$pid" || status=$?
    kill "$watchdog" 2>/dev/null || true
    wait "$watchdog" 2>/dev/null || true
}

# 2. SIGTERM to b under load: exit 0, and every acknowledged write is stored.
writer() {
    local w=$1 i=0 code
    while [ $i -lt 2000 ]; do
        code=$(curl -s -o /dev/null -w '%{http_code}' -H 'content-type: application/json' \
            -X POST -d "{\"userID\":\"load-$w-$i\"}" "$b/users" || true)
        case $code in
            2??) echo "load-$w-$i" >>"$work/acked-$w.txt" ;;
            000) return 0 ;;  # b no longer takes connections
            *) echo "load-$w-$i $code" >>"$work/refused-$w.txt" ;;
        esac
        i=$((i + 1))
    done
}
# a, the survivor, streams every save b makes: none may be missing from its stream.
curl -sN "$a/events" >"$work/events-a.txt" 2>/dev/null &
pids+=($!)
wait_for "$work/events-a.txt" ": listening" "a's event stream"
writers=()
for w in 1 2 3 4; do
    writer "$w" &
    writers+=($!)
done
wait_for "$work/acked-1.txt" "load-1-30" "the writers"
term_start=$SECONDS
terminate "$pid_b"
say "b exited with status $status $((SECONDS - term_start)) s after SIGTERM"
[ "$status" -eq 0 ] || die "b exited with $status after SIGTERM (137: killed after 30 s)"
for writer_pid in "${writers[@]}"; do wait "$writer_pid" || true; done
wait "$events_pid" 2>/dev/null || true  # b's event stream ended with the server
cat "$work"/acked-*.txt | sort >"$work/acked.txt"
acked=$(wc -l <"$work/acked.txt")
[ "$acked" -ge 31 ] || die "only $acked writes were acknowledged before SIGTERM"
psql_do -d smoke -At -c "SELECT user_id FROM users WHERE user_id LIKE 'load-%'" | sort >"$work/stored.txt"
missing=$(comm -23 "$work/acked.txt" "$work/stored.txt" | wc -l)
[ "$missing" -eq 0 ] || die "$missing acknowledged writes are not in the table: $(comm -23 "$work/acked.txt" "$work/stored.txt" | head -5)"
say "$acked writes acknowledged under load, all of them in the table; $(cat "$work"/refused-*.txt 2>/dev/null | wc -l) answered otherwise"
grep -qF "stopped" "$work/b.log" || die "b did not log its stop"

# a saw b's writes: in its list, and each of them in its event stream.
curl -sf "$a/users" | grep -qF "\"userID\":\"$(tail -n 1 "$work/acked.txt")\"" || die "a's list lacks b's last acknowledged write"
psql_do -d smoke -At -c "SELECT 'User/' || id FROM users WHERE user_id LIKE 'load-%'" | sort >"$work/stored-ids.txt"
deadline=$((SECONDS + 20))
while true; do
    grep -o '"User/[0-9]*"' "$work/events-a.txt" | tr -d '"' | sort -u >"$work/streamed-ids.txt"
    unstreamed=$(comm -23 "$work/stored-ids.txt" "$work/streamed-ids.txt" | wc -l)
    [ "$unstreamed" -eq 0 ] && break
    [ $SECONDS -lt $deadline ] || die "$unstreamed of b's stored writes never reached a's event stream"
    sleep 0.2
done
say "a's event stream carried all $(wc -l <"$work/stored-ids.txt") of b's stored writes"
terminate "$pid_a"
[ "$status" -eq 0 ] || die "a exited with $status after SIGTERM (137: killed after 30 s)"
say "passed in $((SECONDS - started)) s"
