#!/usr/bin/env bash
# stack-db-upgrade.sh STACK: `generic-framework db upgrade` once, as a Swarm job on the stack's
# network with the stack's database_url secret (nothing on disk, nothing in an environment),
# with BOT_IMAGE. Initialises a new deployment's database (the replicas never do: they refuse it
# until this ran) and applies a release's migrations before its rolling upgrade. Retries while
# PostgreSQL is still starting (UPGRADE_TIMEOUT seconds, 300); exits 1 when it fails.
set -euo pipefail
stack=${1:?usage: stack-db-upgrade.sh STACK}
image=${BOT_IMAGE:?set BOT_IMAGE to the image to run db upgrade with}
job="${stack}_db-upgrade"
deadline=$(( $(date +%s) + ${UPGRADE_TIMEOUT:-300} ))
while :; do
    docker service rm "$job" >/dev/null 2>&1 || true
    docker service create --detach --quiet --name "$job" --mode replicated-job \
        --restart-condition none --network "${stack}_default" \
        --secret "source=gf-database-url-${SECRETS_VERSION:-1},target=database_url" \
        --env DATABASE_URL_FILE=/run/secrets/database_url \
        "$image" generic-framework db upgrade >/dev/null
    state=
    until [ "$state" = Complete ] || [ "$state" = Failed ] || [ "$state" = Rejected ]; do
        sleep 2
        state=$(docker service ps "$job" --format '{{.CurrentState}}' | head -n1 | cut -d' ' -f1)
        [ "$(date +%s)" -lt "$deadline" ] || break
    done
    log=$(docker service logs --raw "$job" 2>&1 | tail -n 3)
    if [ "$state" = Complete ]; then
        docker service rm "$job" >/dev/null
        echo "stack-db-upgrade: $log"
        exit 0
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
        docker service rm "$job" >/dev/null 2>&1 || true
        echo "stack-db-upgrade: not done within ${UPGRADE_TIMEOUT:-300} s: $log" >&2
        exit 1
    fi
    sleep 3  # PostgreSQL still starting: again
done
