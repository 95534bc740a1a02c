#!/usr/bin/env bash
# stack-secrets.sh [DIR]: the secret files deploy/stack.yml reads (DIR: secrets/), each 0600,
# made once: an existing file is left as it is. postgres_password and bot_api_token are new
# random values; database_url is built from the password; zai_api_key is ZAI_API_KEY (or
# OPENAI_API_KEY) from the environment, or "unused" with the mock overlay (stack.mock.yml).
# Keep DIR out of version control (.gitignore lists secrets/) and back it up with the database.
set -euo pipefail
dir=${1:-secrets}
umask 077
mkdir -p "$dir"
random() { python3 -c 'import secrets; print(secrets.token_urlsafe(32))'; }
write() {  # NAME VALUE: only when absent
    if [ ! -s "$dir/$1" ]; then printf '%s\n' "$2" >"$dir/$1"; echo "made $dir/$1"; fi
}
write postgres_password "$(random)"
write bot_api_token "$(random)"
write database_url "postgresql://bot:$(head -n1 "$dir/postgres_password")@postgres:5432/bot"
write zai_api_key "${ZAI_API_KEY:-${OPENAI_API_KEY:-unused}}"
