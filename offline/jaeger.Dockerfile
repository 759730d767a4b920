# Offline stand-in for jaegertracing/jaeger (all-in-one, v2) at the pinned release: the jaeger
# binary built from the Go module proxy by offline/go-build (the build context), at the upstream
# image's paths (entrypoint /cmd/jaeger/jaeger-linux with no arguments: the embedded all-in-one
# config, traces in memory; JAEGER_LISTEN_HOST=0.0.0.0; user 10001), with wget for the
# healthcheck as busybox provides upstream.
# The module carries no web UI (its assets are an npm build the module ships empty): / answers
# with Jaeger's own placeholder page; the query API (/api/services, /api/traces) is the release's.
ARG BASE=wirelab/python-base:bookworm
FROM ${BASE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends wget \
    && rm -rf /var/lib/apt/lists/*
COPY jaeger /cmd/jaeger/jaeger-linux
ENV JAEGER_LISTEN_HOST=0.0.0.0
# OTLP gRPC and HTTP, the query API and UI, the health extension.
EXPOSE 4317 4318 16686 13133
USER 10001
ENTRYPOINT ["/cmd/jaeger/jaeger-linux"]
