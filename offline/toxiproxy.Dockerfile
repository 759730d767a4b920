# Offline stand-in for ghcr.io/shopify/toxiproxy: the pinned release built from its Go module by
# offline/go-build (the build context; static, as upstream's), at the upstream image's paths
# (/toxiproxy as the entrypoint, /toxiproxy-cli for the healthcheck) on the stand-in base.
ARG BASE=wirelab/python-base:bookworm
FROM ${BASE}
COPY toxiproxy toxiproxy-cli /
USER nobody
EXPOSE 8474
ENTRYPOINT ["/toxiproxy"]
