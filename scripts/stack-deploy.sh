#!/usr/bin/env bash
# stack-deploy.sh STACK [docker stack deploy options...]: deploy deploy/stack.yml (plus
# deploy/stack.mock.yml when MOCK=1) and wait until every service of the stack has finished its
# update; exit 1 if one rolled back or paused, or if it is not done within DEPLOY_TIMEOUT
# seconds (900). `docker stack deploy --detach=false` alone returns once the new tasks are
# created, before a start-first rolling update is done.
set -euo pipefail
stack=${1:?usage: stack-deploy.sh STACK [options]}; shift
here=$(cd "$(dirname "$0")/.." && pwd)
deploy=${STACK_DIR:-$here/deploy}  # another folder with the same layout, e.g. a changed copy
files=(-c "$deploy/stack.yml")
[ "${MOCK:-0}" = 1 ] && files+=(-c "$deploy/stack.mock.yml")
docker stack deploy --detach=false --prune "${files[@]}" "$@" "$stack" >/dev/null

deadline=$(( $(date +%s) + ${DEPLOY_TIMEOUT:-900} ))
while :; do
    pending=()
    for service in $(docker stack services --format '{{.Name}}' "$stack"); do
        state=$(docker service inspect --format '{{if .UpdateStatus}}{{.UpdateStatus.State}}{{end}}' "$service")
        case "$state" in
            rollback_completed|rollback_paused|paused)
                echo "stack-deploy: $service: update $state" >&2
                docker service inspect --format '{{.UpdateStatus.Message}}' "$service" >&2
                exit 1 ;;
            updating|rollback_started) pending+=("$service: $state"); continue ;;
        esac
        # Every task the service wants is running (replicated: N/N; global: one per node).
        replicas=$(docker service ls --filter "name=$service" --format '{{.Name}} {{.Replicas}}' \
            | awk -v s="$service" '$1 == s {print $2}')
        running=${replicas%%/*}; wanted=${replicas#*/}; wanted=${wanted%% *}
        [ "$running" = "$wanted" ] || pending+=("$service: $replicas")
    done
    [ "${#pending[@]}" -eq 0 ] && break
    if [ "$(date +%s)" -ge "$deadline" ]; then
        echo "stack-deploy: not done after ${DEPLOY_TIMEOUT:-900} s: ${pending[*]}" >&2
        exit 1
    fi
    sleep 2
done
echo "stack-deploy: $stack: every service updated and running"
