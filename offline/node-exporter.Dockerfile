# Offline stand-in for prom/node-exporter at the pinned release: node_exporter built from the Go
# module proxy by offline/go-build (the build context), entrypoint /bin/node_exporter and user
# nobody like the official image, wget for the healthcheck.
ARG BASE=wirelab/python-base:bookworm
FROM ${BASE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends wget \
    && rm -rf /var/lib/apt/lists/*
COPY node_exporter /bin/
USER nobody
EXPOSE 9100
ENTRYPOINT ["/bin/node_exporter"]
