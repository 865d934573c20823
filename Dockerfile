# NeuralMind API (self-hosted): the team server (gunicorn, server mode) in a slim image.
#   docker build -t neuralmind .
#   docker run -v $PWD/config:/config:ro -v $PWD/repos:/repos:ro -v nm-data:/data \
#              -p 127.0.0.1:8765:8765 neuralmind
# /config/server.toml is the operator's config (see conf/server.example.toml and docs/security.md);
# state (kernel.db, tokens.json, per-project state) lives in the /data volume.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    NEURALMIND_HOME=/data

RUN useradd --system --uid 10001 --create-home --home-dir /home/neuralmind neuralmind \
 && mkdir -p /data /repos /config \
 && chown neuralmind:neuralmind /data

WORKDIR /app
COPY pyproject.toml README.md ./
COPY kernel ./kernel
COPY neuralmind ./neuralmind
COPY plugins ./plugins
RUN pip install . && rm -rf /app/build

USER neuralmind
EXPOSE 8765
VOLUME ["/data", "/repos"]

# The slim image has no curl. NEURALMIND_HEALTH_URL=https://… when the server itself holds
# the TLS certificate; that self-check on loopback does not verify the public name.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, ssl, urllib.request; u = os.environ.get('NEURALMIND_HEALTH_URL', 'http://127.0.0.1:8765/v1/health'); urllib.request.urlopen(u, timeout=4, context=ssl._create_unverified_context() if u.startswith('https:') else None)"]

CMD ["neuralmind", "serve", "--config", "/config/server.toml"]
