# Offline stand-in for the nginx image: Debian bookworm's nginx 1.22 (HTTP/2 and grpc_pass built
# in) on the stand-in base, run like the official image (nginx in the foreground, its config at
# /etc/nginx/nginx.conf, SIGQUIT for a graceful stop) but as www-data, which the lab's config
# allows (topologies/nginx.conf writes only under /tmp, listens above 1024). The healthcheck
# needs only bash, as in the official image.
ARG BASE=wirelab/python-base:bookworm
FROM ${BASE}
# Package scripts try to start the daemon; policy-rc.d tells invoke-rc.d not to in a build.
RUN printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \
    && apt-get update \
    && apt-get install -y --no-install-recommends nginx \
    && rm -rf /var/lib/apt/lists/* /usr/sbin/policy-rc.d \
    && nginx -V 2>&1 | grep -q -- --with-http_v2_module \
    && ! nginx -V 2>&1 | grep -q -- --without-http_grpc_module
USER www-data
EXPOSE 8000 8080 50051
STOPSIGNAL SIGQUIT
CMD ["nginx", "-g", "daemon off;"]
