# The bot service: python:3.11-slim pinned by digest, runtime dependencies from a hashed lock
# file, non-root, health-checked. The same image runs the mock Z.AI server.
#
#   docker build -t generic-framework .
#   docker run --env-file .env -v gf-data:/data -p 127.0.0.1:8080:8080 generic-framework
#   docker run -e HEALTHCHECK_URL=http://127.0.0.1:8090/healthz generic-framework \
#       generic-framework mock --host 0.0.0.0 --port 8090
#
# PYTHON_IMAGE pins the base by digest (python:3.11-slim when pinned); refresh it deliberately
# with `docker buildx imagetools inspect python:3.11-slim`. requirements.lock pins every runtime
# dependency with hashes (regenerate: pip-compile --generate-hashes --allow-unsafe
# --strip-extras --no-emit-index-url --extra postgres --output-file requirements.lock
# pyproject.toml). Needs Docker Engine 25+ (HEALTHCHECK --start-interval).
ARG PYTHON_IMAGE=python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY generic_framework ./generic_framework
RUN pip wheel --no-deps --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/home/bot \
    PERSONAS_DIR=/app/personas \
    DATA_DIR=/data \
    BOT_HOST=0.0.0.0 \
    BOT_PORT=8080
# Dependencies first, in their own layer: a code change does not reinstall them, and the lock
# file's hashes make the install reproducible.
COPY requirements.lock /tmp/requirements.lock
RUN pip install --require-hashes --no-deps -r /tmp/requirements.lock && rm /tmp/requirements.lock
# The user's home is writable; /data is the only other place it writes. /app/data points there,
# so a relative DATA_DIR=./data (as in a .env copied from .env.example) lands in /data too.
# No VOLUME here: compose names the bot's volume, and the mock (same image) needs none.
RUN groupadd --system --gid 10001 bot \
    && useradd --system --uid 10001 --gid bot --home-dir /home/bot --create-home \
       --shell /usr/sbin/nologin bot \
    && mkdir -p /app/personas /data && chown bot:bot /data && ln -s /data /app/data
# The app last: only this layer changes with the code.
COPY --from=build /wheels /wheels
RUN pip install --no-deps /wheels/*.whl && rm -rf /wheels
WORKDIR /app
COPY --chown=root:root personas /app/personas
USER bot
EXPOSE 8080
# The server's port is fixed by CMD; HEALTHCHECK_URL points the check elsewhere (the mock: 8090).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --start-interval=2s --retries=3 \
    CMD ["python", "-c", "import os, sys, urllib.request; url = os.environ.get('HEALTHCHECK_URL') or 'http://127.0.0.1:8080/healthz'; sys.exit(urllib.request.urlopen(url, timeout=4).status != 200)"]
# Binding 0.0.0.0 needs BOT_API_TOKEN: without it the service refuses to start.
CMD ["generic-framework", "serve", "--host", "0.0.0.0", "--port", "8080"]
