# llmduel service image: `docker compose up` runs it against PostgreSQL.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    NUMBA_CACHE_DIR=/tmp/numba-cache

WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY algorithms ./algorithms
COPY judges ./judges
COPY service ./service
COPY migrations ./migrations
# Editable install: the service finds migrations/ and alembic.ini next to the package.
RUN pip install -e . \
    && useradd --create-home --uid 10001 llmduel \
    && mkdir -p /data && chown llmduel /data
USER llmduel

EXPOSE 8000
# Default: SQLite in /data. docker-compose.yml sets DATABASE_URL to PostgreSQL.
ENV DATABASE_URL=sqlite:////data/llmduel.db
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s \
    CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz').status != 200)"
CMD ["sh", "-c", "llmduel db upgrade && exec llmduel serve --host 0.0.0.0 --port 8000"]
