# Offline stand-in for prom/prometheus: Debian's package on the stand-in base, laid out like the
# official image (entrypoint /bin/prometheus, config in /etc/prometheus, data in /prometheus,
# user nobody, wget for the healthcheck as busybox provides upstream).
ARG BASE=wirelab/python-base:bookworm
FROM ${BASE}
# Package scripts try to start the daemon; policy-rc.d tells invoke-rc.d not to in a build.
RUN printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \
    && apt-get update \
    && apt-get install -y --no-install-recommends prometheus wget \
    && rm -rf /var/lib/apt/lists/* /usr/sbin/policy-rc.d \
    && test -x /bin/prometheus && test -x /bin/promtool \
    && mkdir -p /prometheus && chown nobody:nogroup /prometheus
USER nobody
WORKDIR /prometheus
EXPOSE 9090
VOLUME ["/prometheus"]
ENTRYPOINT ["/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
