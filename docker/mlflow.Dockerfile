# The MLflow tracking server of docker/compose.yaml: MLflow (with its basic-auth app) and the
# PostgreSQL driver in a virtual environment, every package from docker/mlflow.lock (hashed;
# docker/mlflow.in says what it holds).
ARG BASE_IMAGE=python:3.12-slim-bookworm
FROM ${BASE_IMAGE}

ARG BASE_IMAGE
LABEL org.opencontainers.image.title="pipeline-mlflow" \
      org.opencontainers.image.description="MLflow tracking server on PostgreSQL, artifacts proxied onto a volume" \
      org.opencontainers.image.version="3.17.2" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"

ENV VIRTUAL_ENV=/opt/mlflow
ENV PATH=${VIRTUAL_ENV}/bin:${PATH}
COPY docker/mlflow.lock /opt/mlflow.lock
RUN python3 -m venv "${VIRTUAL_ENV}" \
    && pip install --no-cache-dir --disable-pip-version-check --require-hashes --no-deps -r /opt/mlflow.lock \
    && pip check \
    && mkdir -p /mlflow/artifacts
COPY docker/mlflow-serve.py /usr/local/bin/mlflow-serve
EXPOSE 5000
HEALTHCHECK --interval=5s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:5000/health', timeout=4)"]
ENTRYPOINT ["python3", "/usr/local/bin/mlflow-serve"]
