# Offline stand-in for prom/node-exporter: Debian's package on the stand-in base, entrypoint
# /bin/node_exporter and user nobody like the official image, wget for the healthcheck.
ARG BASE=wirelab/python-base:bookworm
FROM ${BASE}
# Package scripts try to start the daemon; policy-rc.d tells invoke-rc.d not to in a build.
RUN printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \
    && apt-get update \
    && apt-get install -y --no-install-recommends prometheus-node-exporter wget \
    && rm -rf /var/lib/apt/lists/* /usr/sbin/policy-rc.d \
    && ln -s /usr/bin/prometheus-node-exporter /bin/node_exporter \
    && test -x /bin/node_exporter
USER nobody
EXPOSE 9100
ENTRYPOINT ["/bin/node_exporter"]
