# gpu2dra: the admission webhook image. Built by tests/image/build.sh (buildah, no Docker
# engine) and by the release workflow; any builder works: docker build -t gpu2dra .
# The base, one argument for both stages. The release resolves the tag to its digest once and
# builds from BASE=docker.io/library/python:3.11-slim-bookworm@sha256:<digest>, recorded in the
# image's org.opencontainers.image.base.* labels: a rebuild passes the same BASE.
ARG BASE=docker.io/library/python:3.11-slim-bookworm
FROM ${BASE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/gpu2dra
# The pinned dependencies first, in a layer of their own: a change under app/ reuses it. Each
# wheel must match a hash in constraints.txt.
COPY constraints.txt ./
RUN /opt/gpu2dra/bin/pip install --no-cache-dir --require-hashes -r constraints.txt
COPY pyproject.toml README.md ./
COPY app ./app
# What gpu2dra never imports goes: the kubernetes client's asyncio twin (kubernetes.aio) with
# the HTTP stack only it uses, and the installers. What stays is byte-compiled once, here: the
# root filesystem is read-only at run time, so each start would compile every module again.
# gpu2dra is built with the setuptools just installed from constraints.txt (no build
# isolation: nothing is fetched unhashed).
RUN /opt/gpu2dra/bin/pip install --no-cache-dir --no-deps --no-build-isolation . \
    && rm -rf /opt/gpu2dra/lib/python3.11/site-packages/kubernetes/aio \
    && /opt/gpu2dra/bin/pip uninstall --yes --quiet aiohttp aiohttp-retry aiosignal \
        aiohappyeyeballs attrs frozenlist multidict propcache yarl setuptools pip \
    && find /opt/gpu2dra -name '__pycache__' -type d -prune -exec rm -rf {} + \
    && /opt/gpu2dra/bin/python -m compileall -q -j 0 --invalidation-mode unchecked-hash \
        /opt/gpu2dra/lib

# The final stage has the virtualenv and the interpreter, and no build tools.
FROM ${BASE}
ARG BASE
ARG VERSION=0.0.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="gpu2dra" \
      org.opencontainers.image.description="Admission webhook that moves nvidia.com/gpu workloads onto Kubernetes DRA" \
      org.opencontainers.image.source="https://github.com/gpu2dra/gpu2dra" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="${BASE}"
ENV PATH=/opt/gpu2dra/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    GPU2DRA_REVISION=${REVISION}
COPY --from=build /opt/gpu2dra /opt/gpu2dra
USER 65532:65532
EXPOSE 8443
# The CLI: `serve` by default (the chart says it too); `docker run IMAGE translate -f -` and
# the other commands work as well.
ENTRYPOINT ["gpu2dra"]
CMD ["serve"]
