# Offline stand-in for the rabbitmq management image: Debian bookworm's rabbitmq-server (3.10) on
# the stand-in base, run like the official image: `rabbitmq-server` in the foreground as the
# package's rabbitmq user, data in /var/lib/rabbitmq, extra config read from /etc/rabbitmq/conf.d
# (where compose mounts rabbitmq/rabbitmq.conf), and the Prometheus and management plugins
# enabled at build time as the official management image has them. The healthcheck's
# rabbitmq-diagnostics comes with the package.
ARG BASE=wirelab/python-base:bookworm
FROM ${BASE}
# Package scripts try to start the daemon; policy-rc.d tells invoke-rc.d not to in a build.
RUN printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \
    && apt-get update \
    && apt-get install -y --no-install-recommends rabbitmq-server \
    && rm -rf /var/lib/apt/lists/* /usr/sbin/policy-rc.d \
    && rabbitmq-plugins enable --offline rabbitmq_prometheus rabbitmq_management \
    && mkdir -p /etc/rabbitmq/conf.d \
    && chown -R rabbitmq:rabbitmq /var/lib/rabbitmq /var/log/rabbitmq \
    && rm -f /var/lib/rabbitmq/.erlang.cookie
# The package's scripts themselves first on PATH: its /usr/sbin wrapper sends the server's output to
# /var/log/rabbitmq/startup_log, not to `docker logs`. RUNNING_UNDER_SYSTEMD makes the script exec
# the Erlang VM, so SIGTERM reaches the broker itself (as upstream's entrypoint sets it). The CLI
# tools (the healthcheck) find the node's Erlang cookie in $HOME, as upstream's do.
ENV PATH=/usr/lib/rabbitmq/bin:$PATH RUNNING_UNDER_SYSTEMD=true HOME=/var/lib/rabbitmq \
    LANG=C.UTF-8 LC_ALL=C.UTF-8
USER rabbitmq
WORKDIR /var/lib/rabbitmq
EXPOSE 5672 15672 15692
VOLUME ["/var/lib/rabbitmq"]
CMD ["rabbitmq-server"]
