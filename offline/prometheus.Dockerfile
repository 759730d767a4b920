# Offline stand-in for prom/prometheus at the pinned release: prometheus and promtool built from
# the Go module proxy by offline/go-build (the build context), laid out like the official image
# (entrypoint /bin/prometheus, config in /etc/prometheus, data in /prometheus, user nobody, wget
# for the healthcheck as busybox provides upstream).
# The module carries no web UI: its assets are npm-built files of the release tarball. Every
# UI page answers with one sentence instead (Prometheus reads static/mantine-ui/index.html from
# its working directory, whose name must not be "prometheus": it would look under web/ui/);
# the API, the queries and /metrics are the release's own.
ARG BASE=wirelab/python-base:bookworm
FROM ${BASE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends wget \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /prometheus /usr/share/prometheus-ui/static/mantine-ui \
    && chown nobody:nogroup /prometheus \
    && printf '%s\n' '<!doctype html><title>Prometheus</title><p>This Prometheus was built from source without its web UI (the Go module has no UI assets): the HTTP API (<a href="api/v1/targets">/api/v1/targets</a> lists the targets), <a href="metrics">/metrics</a> and every query work.</p>' \
        > /usr/share/prometheus-ui/static/mantine-ui/index.html
COPY prometheus promtool /bin/
USER nobody
WORKDIR /usr/share/prometheus-ui
EXPOSE 9090
VOLUME ["/prometheus"]
ENTRYPOINT ["/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
