#!/usr/bin/env bash
# multinode.sh (`make multinode`): deploy/stack.yml across a two-node Docker Swarm made on this
# one machine, under faults and a rolling upgrade, then a check of the database against what the
# clients were told, then everything it made is removed. Its last line:
#   multinode: nodes=2 replicas=N turns=N lost=0 duplicated=0 failed_during_upgrade=0
#
# Needs: root, a running Docker engine 25+ (node 1, this machine's; it must not be in a swarm
# already: the script makes it a manager and leaves the swarm at the end), the images
# python:3.11-slim (the Dockerfile's base; PYTHON_IMAGE), postgres:17 and haproxy:3.0, a Debian
# image (NODE_BASE_IMAGE, local/debian:trixie) whose apt sources reach Debian's mirror, and the
# project's virtual environment (`make install`). Nothing is pulled from a registry.
#
# What it does, each step timed in its transcript:
#  1. builds the bot's image twice (generic-framework:mn1, and mn2 with another label: the
#     upgrade's rebuilt image) and node 2's engine image (Debian's docker.io on NODE_BASE_IMAGE);
#  2. node 2: a second dockerd in a privileged container (its own data root in a volume, its own
#     network namespace on a bridge the script makes, 10.231.0.0/24; its API on a Unix socket in
#     a temporary folder); the images moved to it with `docker save | docker load`;
#  3. a swarm: this engine the manager (advertising 10.231.0.1), node 2 joined; this node
#     labelled generic-framework.database=true (PostgreSQL's node, with its volume);
#  4. the stack (deploy/stack.yml + deploy/stack.mock.yml: the mock Z.AI, no key) with BOT_REPLICAS
#     replicas over both nodes (dnsrr endpoints: this kernel has no IPVS), secrets made by
#     scripts/stack-secrets.sh in the temporary folder, `db upgrade` once as a new deployment;
#  5. the load (scripts/multinode_client.py): WORKERS clients, turns with Idempotency-Key retries,
#     through node 1's proxy (127.0.0.1:PROXY_PORT) and node 2's (10.231.0.2:PROXY_PORT), while:
#     a. node 2's engine is killed (its container, every task on it with it): its replicas come
#        back on node 1; then node 2 is started again and rejoins;
#     b. PostgreSQL's node (node 1) is drained: PostgreSQL stays pending (its volume is there)
#        instead of starting empty on node 2, the service answers 503; the node comes back
#        active and PostgreSQL restarts on its own volume;
#     c. PostgreSQL is paused (`docker pause`: hung, not stopped) for PAUSE_SECONDS: every
#        request gets its answer or its 503 within the documented bound (2 x
#        DATABASE_POOL_TIMEOUT + 1 s, plus the proxy's check), none waits longer: counted from
#        the pause's start for a request already running then, from its own start otherwise;
#     d. a rolling upgrade to mn2 (start-first, health-gated; scripts/stack-deploy.sh waits for
#        it): no request fails;
#  6. the check: every conversation read back: lost = acknowledged but not stored, duplicated =
#     stored more often than sent;
#  7. teardown (also on failure or Ctrl-C): the stack, the swarm (both nodes leave), node 2's
#     container and volume, the bridge, the stack's volumes and configs, the temporary folder.
#     The built images stay (a later run reuses their layers): `docker rmi` them by hand.
#
# Traffic goes only to 127.0.0.1 and to the bridge and containers the script made. Bounded and
# modest (two shared cores): WORKERS clients (3), a pause between turns, a run deadline.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
PYTHON_IMAGE=${PYTHON_IMAGE:-python:3.11-slim}
NODE_BASE_IMAGE=${NODE_BASE_IMAGE:-local/debian:trixie}
BOT_REPLICAS=${BOT_REPLICAS:-3}
WORKERS=${WORKERS:-3}
PROXY_PORT=${PROXY_PORT:-18000}
PAUSE_SECONDS=${PAUSE_SECONDS:-20}
STACK=gfmn
NODE2=gfmn-node2
LINK=gfmn-link
SUBNET=10.231.0.0/24 NODE1_IP=10.231.0.1 NODE2_IP=10.231.0.2
DB_BOUND=11   # 2 x DATABASE_POOL_TIMEOUT (5) + 1: store/postgres_bounds.py
PROXY_SLACK=8 # the proxy's own check (3 s, 2 failures) and a busy machine's share

T0=$(date +%s)
say() { printf '[multinode %4ss] %s\n' "$(( $(date +%s) - T0 ))" "$*"; }
die() { say "FAILED: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root"
docker info >/dev/null 2>&1 || die "no Docker engine answers (docker info)"
[ "$(docker info --format '{{.Swarm.LocalNodeState}}')" = inactive ] \
    || die "this engine is already in a swarm: the script makes its own and would leave it"
[ -x "$PYTHON" ] || die "no $PYTHON: run make install first"

TMP=$(mktemp -d -t gfmn.XXXXXX)
SOCK="$TMP/node2"
mkdir -p "$SOCK"
D2=(docker -H "unix://$SOCK/docker.sock")
LOAD_PID=
GWBRIDGE_MADE=no
docker network inspect docker_gwbridge >/dev/null 2>&1 || GWBRIDGE_MADE=yes

teardown() {
    set +e
    say "teardown"
    [ -n "$LOAD_PID" ] && kill "$LOAD_PID" 2>/dev/null
    docker unpause "$(pg_container 2>/dev/null)" >/dev/null 2>&1
    docker stack rm "$STACK" >/dev/null 2>&1
    for _ in $(seq 60); do
        [ -z "$(docker ps -q --filter "label=com.docker.stack.namespace=$STACK")" ] && break
        sleep 1
    done
    "${D2[@]}" swarm leave --force >/dev/null 2>&1
    docker swarm leave --force >/dev/null 2>&1
    docker rm -f "$NODE2" >/dev/null 2>&1
    docker volume rm -f gfmn-node2-data "${STACK}_postgres-data" >/dev/null 2>&1
    docker network rm "$LINK" >/dev/null 2>&1
    [ "$GWBRIDGE_MADE" = yes ] && docker network rm docker_gwbridge >/dev/null 2>&1
    ip netns del gfmn-probe 2>/dev/null
    rm -rf "$TMP"
    say "teardown done: no stack, no swarm, no node 2, no bridge, no volumes left"
}
trap 'code=$?; trap - EXIT; teardown; exit "$code"' EXIT
trap 'exit 130' INT TERM

pg_container() {
    docker ps -q --filter "label=com.docker.swarm.service.name=${STACK}_postgres" | head -n1
}
replicas_on() {  # NODE-ENGINE... : running bot tasks on that engine
    "$@" ps -q --filter "label=com.docker.swarm.service.name=${STACK}_bot" | wc -l
}
wait_for() {  # SECONDS WHAT COMMAND...
    local seconds=$1 what=$2; shift 2
    local end=$(( $(date +%s) + seconds ))
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$end" ] || die "$what: not within ${seconds}s"
        sleep 2
    done
}
ready() { curl -fsS -o /dev/null --max-time 5 "http://127.0.0.1:$PROXY_PORT/readyz"; }
phase() { echo "$1" >"$TMP/phase.new" && mv "$TMP/phase.new" "$TMP/phase"; say "phase $1"; }

# 1. images ------------------------------------------------------------------------------------
say "building generic-framework:mn1 and :mn2 (PYTHON_IMAGE=$PYTHON_IMAGE)"
docker build -q --build-arg PYTHON_IMAGE="$PYTHON_IMAGE" -t generic-framework:mn1 "$ROOT" >/dev/null
docker build -q --build-arg PYTHON_IMAGE="$PYTHON_IMAGE" --label org.example.generic-framework.build=mn2 \
    -t generic-framework:mn2 "$ROOT" >/dev/null
[ "$(docker image inspect -f '{{.Id}}' generic-framework:mn1)" != \
  "$(docker image inspect -f '{{.Id}}' generic-framework:mn2)" ] || die "mn2 is not a new image"
say "building node 2's engine image on $NODE_BASE_IMAGE (Debian's docker.io)"
mkdir -p "$TMP/engine"
cat >"$TMP/engine/Dockerfile" <<EOF
FROM $NODE_BASE_IMAGE
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        docker.io iptables ca-certificates >/dev/null && rm -rf /var/lib/apt/lists/*
VOLUME /var/lib/docker
ENTRYPOINT ["dockerd"]
EOF
docker build -q -t gfmn-engine "$TMP/engine" >/dev/null

# 2. node 2 ------------------------------------------------------------------------------------
say "node 2: a second engine in a privileged container on $LINK ($SUBNET)"
docker network create --driver bridge --subnet "$SUBNET" --gateway "$NODE1_IP" "$LINK" >/dev/null
# /run is a tmpfs: a restarted node starts with no stale pid file, as a rebooted machine does.
start_node2() {
    docker run -d --privileged --name "$NODE2" --hostname "$NODE2" --network "$LINK" \
        --ip "$NODE2_IP" --tmpfs /run -v gfmn-node2-data:/var/lib/docker -v "$SOCK:/gfmn" \
        gfmn-engine -H unix:///gfmn/docker.sock >/dev/null
}
start_node2
wait_for 90 "node 2's engine" "${D2[@]}" info
say "node 2: $("${D2[@]}" version --format '{{.Server.Version}}'), storage $("${D2[@]}" info --format '{{.Driver}}')"
say "moving the images to node 2 (docker save | docker load)"
docker save generic-framework:mn1 generic-framework:mn2 postgres:17 haproxy:3.0 \
    | "${D2[@]}" load -q >/dev/null

# 3. swarm -------------------------------------------------------------------------------------
docker swarm init --advertise-addr "$NODE1_IP" --listen-addr "$NODE1_IP:2377" >/dev/null
"${D2[@]}" swarm join --token "$(docker swarm join-token -q worker)" \
    --advertise-addr "$NODE2_IP" "$NODE1_IP:2377" >/dev/null
NODE1_ID=$(docker info --format '{{.Swarm.NodeID}}')
docker node update --label-add generic-framework.database=true "$NODE1_ID" >/dev/null
say "swarm: $(docker node ls --format '{{.Hostname}}={{.Status}}/{{.Availability}}' | tr '\n' ' ')"

# 4. the stack ---------------------------------------------------------------------------------
# The stack's overlays are encrypted (IPsec ESP with AES-GCM between the nodes). A kernel without
# it (no rfc4106(gcm(aes)) in XFRM) carries no encrypted overlay traffic between nodes: probe it
# in a throwaway network namespace, and on such a kernel run a copy of the stack without the
# option, saying so. The copy keeps the stack file's folder layout (its relative paths).
export STACK_DIR="$ROOT/deploy"
ip netns add gfmn-probe
if ip -n gfmn-probe xfrm state add src 10.0.0.1 dst 10.0.0.2 proto esp spi 0x100 mode transport \
        aead 'rfc4106(gcm(aes))' 0x0102030405060708090a0b0c0d0e0f1011121314 64 2>/dev/null; then
    say "overlays encrypted (this kernel has ESP with AES-GCM)"
else
    mkdir -p "$TMP/tree"
    cp -r "$ROOT/deploy" "$ROOT/personas" "$TMP/tree/"
    sed -i '/^    driver_opts:$/{N;/encrypted: "true"/d}' "$TMP/tree/deploy/stack.yml"
    if grep -q 'encrypted: "true"' "$TMP/tree/deploy/stack.yml"; then
        die "could not drop the encryption from the copy"
    fi
    STACK_DIR="$TMP/tree/deploy"
    say "WARNING: this kernel has no ESP with AES-GCM (XFRM): the overlays run UNENCRYPTED here"
fi
ip netns del gfmn-probe
bash "$ROOT/scripts/stack-secrets.sh" "$TMP/secrets" >/dev/null
export BOT_IMAGE=generic-framework:mn1 MOCK_IMAGE=generic-framework:mn1 MOCK=1
export SECRETS_DIR="$TMP/secrets" PROXY_PORT BOT_REPLICAS BOT_MEMORY_LIMIT=512m
export BOT_ALLOWED_HOSTS="bot,proxy,127.0.0.1,$NODE2_IP" MOCK_LATENCY_MS=${MOCK_LATENCY_MS:-300}
say "deploying the stack: $BOT_REPLICAS replicas of $BOT_IMAGE"
docker stack deploy --detach=true --resolve-image never -c "$STACK_DIR/stack.yml" \
    -c "$STACK_DIR/stack.mock.yml" "$STACK" >/dev/null
say "a new deployment: db upgrade once (until then the replicas refuse the empty database)"
upgrade_at=$(date +%s)
BOT_IMAGE=generic-framework:mn1 bash "$ROOT/scripts/stack-db-upgrade.sh" "$STACK"
say "db upgrade done in $(( $(date +%s) - upgrade_at ))s"
DEPLOY_TIMEOUT=600 bash "$ROOT/scripts/stack-deploy.sh" "$STACK" --resolve-image never
wait_for 120 "the proxy's /readyz" ready
spread() {  # the replicas over both nodes again (Swarm does not move running tasks by itself)
    if [ "$(replicas_on "${D2[@]}")" = 0 ] || [ "$(replicas_on docker)" = 0 ]; then
        say "rebalancing the replicas over both nodes (a rolling restart, start-first)"
        docker service update --force --detach=false --quiet "${STACK}_bot" >/dev/null
    fi
    say "bot replicas on node 1: $(replicas_on docker), on node 2: $(replicas_on "${D2[@]}")"
}
spread

# 5. load and faults ---------------------------------------------------------------------------
phase steady
"$PYTHON" "$ROOT/scripts/multinode_client.py" load --url "http://127.0.0.1:$PROXY_PORT" \
    --url "http://$NODE2_IP:$PROXY_PORT" --token-file "$TMP/secrets/bot_api_token" \
    --phase-file "$TMP/phase" --stop-file "$TMP/stop" --out "$TMP/result.json" \
    --workers "$WORKERS" --deadline 2400 &
LOAD_PID=$!
sleep 20

phase node-loss
before=$(replicas_on "${D2[@]}")
docker kill "$NODE2" >/dev/null
say "node 2 killed (its engine and its $before replica(s) with it)"
lost_at=$(date +%s)
wait_for 180 "node 2 marked down" sh -c "docker node ls --format '{{.Hostname}} {{.Status}}' | grep -q '$NODE2 Down'"
say "node 2 down after $(( $(date +%s) - lost_at ))s"
wait_for 240 "replicas back on node 1" sh -c "[ \$(docker ps -q --filter label=com.docker.swarm.service.name=${STACK}_bot | wc -l) -ge $BOT_REPLICAS ]"
say "all $BOT_REPLICAS replicas on node 1 after $(( $(date +%s) - lost_at ))s"
phase node-back
docker start "$NODE2" >/dev/null
wait_for 90 "node 2's engine again" "${D2[@]}" info
wait_for 120 "node 2 ready again" sh -c "docker node ls --format '{{.Hostname}} {{.Status}}' | grep -q '$NODE2 Ready'"
say "node 2 rejoined after $(( $(date +%s) - lost_at ))s"
phase rebalance
spread

phase drain-database-node
turns_before=$(docker exec "$(pg_container)" psql -U bot -d bot -Atc 'SELECT count(*) FROM turns')
docker node update --availability drain "$NODE1_ID" >/dev/null
drained_at=$(date +%s)
sleep 30
pg_tasks=$(docker service ps "${STACK}_postgres" --filter desired-state=running \
    --format '{{.Node}} {{.CurrentState}}' | head -n1)
say "drained for 30s: PostgreSQL's task: ${pg_tasks:-none} (pending, not started on node 2)"
if "${D2[@]}" ps -q --filter "label=com.docker.swarm.service.name=${STACK}_postgres" | grep -q .; then
    die "PostgreSQL started on node 2 (an empty volume)"
fi
docker node update --availability active "$NODE1_ID" >/dev/null
wait_for 180 "PostgreSQL back on node 1" sh -c "[ -n \"\$(docker ps -q --filter label=com.docker.swarm.service.name=${STACK}_postgres)\" ]"
wait_for 180 "the proxy's /readyz after the drain" ready
turns_after=$(docker exec "$(pg_container)" psql -U bot -d bot -Atc 'SELECT count(*) FROM turns')
say "database node active again after $(( $(date +%s) - drained_at ))s: turns stored $turns_before before the drain, $turns_after after (its own volume)"
[ "$turns_after" -ge "$turns_before" ] || die "turns went from $turns_before to $turns_after"
phase steady-2
sleep 15

phase pause-database
paused_at=$(date -u +%Y-%m-%dT%H:%M:%S)
date +%s.%N >"$TMP/pause"
docker pause "$(pg_container)" >/dev/null
say "PostgreSQL paused for ${PAUSE_SECONDS}s"
sleep "$PAUSE_SECONDS"
docker unpause "$(pg_container)" >/dev/null
date +%s.%N >>"$TMP/pause"
say "PostgreSQL resumed"
phase after-pause
wait_for 120 "the proxy's /readyz after the pause" ready
sleep 10

phase upgrade
upgrade_at=$(date +%s)
BOT_IMAGE=generic-framework:mn2 DEPLOY_TIMEOUT=900 \
    bash "$ROOT/scripts/stack-deploy.sh" "$STACK" --resolve-image never
say "rolling upgrade to generic-framework:mn2 done in $(( $(date +%s) - upgrade_at ))s"
phase after-upgrade
sleep 15
touch "$TMP/stop"
wait "$LOAD_PID"
LOAD_PID=

# 6. the check ---------------------------------------------------------------------------------
# A request is held to the bound from when the pause began or it started, whichever is later:
# one already running when PostgreSQL froze counts as well as one sent during the pause.
cat >"$TMP/slow.py" <<'EOF'
import json, sys
result = json.load(open(sys.argv[1]))
bound = float(sys.argv[2]) + float(sys.argv[3])
began, ended = (float(t) for t in open(sys.argv[4]).read().split())
def waited(r):
    start, end = r["wall"], r["wall"] + r["seconds"]
    return end - max(start, began) if start < ended and end > began else 0.0
slow = [r for r in result["requests"] if waited(r) > bound]
EOF
"$PYTHON" - "$TMP/result.json" "$DB_BOUND" "$PROXY_SLACK" "$TMP/pause" <<'EOF'
import sys
exec(open(sys.argv[1].rsplit("/", 1)[0] + "/slow.py").read())
for name, f in result["phases"].items():
    print(f"  {name:20} requests={f['requests']:4} ok={f['ok']:4} failed={f['failed']:3} "
          f"max={f['max_seconds']:6.2f}s statuses={f['statuses']}")
during = [r for r in result["requests"] if waited(r) > 0]
longest = max((waited(r) for r in during), default=0.0)
print(f"  during the pause: {len(during)} request(s) running, the longest waited {longest:.2f}s"
      f" of it; {len(slow)} over the bound of {bound:g}s")
for r in slow:
    print(f"    at {r['at']}s ({r['phase']}) via {r['url']}: HTTP {r['status']} after "
          f"{r['seconds']}s {r['error']}")
print(f"  turns acknowledged {sum(result['acked'].values())}, given up {sum(result['gave_up'].values())}")
EOF
verdict=$("$PYTHON" "$ROOT/scripts/multinode_client.py" verify --url "http://127.0.0.1:$PROXY_PORT" \
    --token-file "$TMP/secrets/bot_api_token" --result "$TMP/result.json" || true)
say "check: $verdict"
read -r turns failed_upgrade slow <<<"$("$PYTHON" - "$TMP/result.json" "$DB_BOUND" "$PROXY_SLACK" "$TMP/pause" <<'EOF'
import sys
exec(open(sys.argv[1].rsplit("/", 1)[0] + "/slow.py").read())
upgrade = result["phases"].get("upgrade", {"failed": 0})
print(sum(result["acked"].values()), upgrade["failed"], len(slow))
EOF
)"
lost=$("$PYTHON" -c 'import json,sys; print(json.loads(sys.argv[1])["lost"])' "$verdict")
duplicated=$("$PYTHON" -c 'import json,sys; print(json.loads(sys.argv[1])["duplicated"])' "$verdict")
if [ "$slow" != 0 ]; then
    say "WARNING: $slow request(s) waited longer than the bound while PostgreSQL was paused; the replicas' warnings:"
    # Bounded: the logs of tasks that died with node 2 are never answered.
    timeout 60 docker service logs --no-task-ids --timestamps --since "$paused_at" "${STACK}_bot" \
        2>&1 | grep -E 'WARNING|ERROR' | sort | head -n 40 || true
fi
trap - EXIT
teardown
echo "multinode: nodes=2 replicas=$BOT_REPLICAS turns=$turns lost=$lost duplicated=$duplicated failed_during_upgrade=$failed_upgrade"
[ "$lost" = 0 ] && [ "$duplicated" = 0 ] && [ "$failed_upgrade" = 0 ] && [ "$slow" = 0 ]
