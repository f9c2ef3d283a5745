# gpu2dra: the admission webhook image.
FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/gpu2dra
COPY pyproject.toml README.md ./
COPY app ./app
RUN /opt/gpu2dra/bin/pip install --no-cache-dir . \
    && find /opt/gpu2dra -name '__pycache__' -type d -prune -exec rm -rf {} +

# The final stage has the virtualenv and the interpreter, and no build tools.
FROM python:3.11-slim-bookworm
ENV PATH=/opt/gpu2dra/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/gpu2dra /opt/gpu2dra
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["gpu2dra", "serve"]
