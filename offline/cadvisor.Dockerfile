# Offline stand-in for the cAdvisor image: Debian bullseye's cadvisor 0.38.7 (the last suite that
# ships it; it needs only libc6 and libzstd1, both in bookworm) at /usr/bin/cadvisor like upstream.
ARG BASE=wirelab/python-base:bookworm
FROM ${BASE}
# The bullseye entry is only there to fetch this one package, then removed so later apt runs in
# derived images see plain bookworm.
RUN printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \
    && echo 'deb http://deb.debian.org/debian bullseye main' > /etc/apt/sources.list.d/bullseye.list \
    && apt-get update \
    && apt-get install -y --no-install-recommends cadvisor/bullseye wget \
    && rm -rf /etc/apt/sources.list.d/bullseye.list /var/lib/apt/lists/* /usr/sbin/policy-rc.d \
    && test -x /usr/bin/cadvisor
EXPOSE 8080
ENTRYPOINT ["/usr/bin/cadvisor", "-logtostderr"]
