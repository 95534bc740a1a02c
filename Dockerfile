# The bot service: python:3.11-slim, runtime dependencies only, non-root, health-checked.
#   docker build -t generic-framework .
#   docker run --env-file .env -p 127.0.0.1:8080:8080 generic-framework
# The same image runs the mock Z.AI server: `generic-framework mock --host 0.0.0.0 --port 8090`.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY generic_framework ./generic_framework
RUN pip wheel --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PERSONAS_DIR=/app/personas \
    DATA_DIR=/data \
    BOT_HOST=0.0.0.0 \
    BOT_PORT=8080
# Runtime dependencies only: the wheel's [project.dependencies], never the dev extras.
COPY --from=build /wheels /wheels
RUN pip install /wheels/*.whl && rm -rf /wheels \
    && groupadd --system --gid 10001 bot \
    && useradd --system --uid 10001 --gid bot --home-dir /app --shell /usr/sbin/nologin bot \
    && mkdir -p /app/personas /data && chown bot:bot /data
WORKDIR /app
COPY --chown=root:root personas /app/personas
USER bot
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4).status != 200)"]
# Binding 0.0.0.0 needs BOT_API_TOKEN: without it the service refuses to start.
CMD ["generic-framework", "serve", "--host", "0.0.0.0", "--port", "8080"]
