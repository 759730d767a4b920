# Offline stand-in for the official node image: Debian bookworm's nodejs (18) and npm on the
# stand-in base, `node` and `npm` on PATH as upstream has them (node/ runs on Node 18, tested by
# node/test/node18.test.js). npm reaches the registry through the host's TLS interception, so
# Node trusts the base image's CA bundle (the host's, offline/build-python-base).
ARG BASE=wirelab/python-base:bookworm
FROM ${BASE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends nodejs npm \
    && rm -rf /var/lib/apt/lists/* \
    && node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)'
ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
CMD ["node"]
