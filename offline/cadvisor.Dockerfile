# Offline stand-in for the cAdvisor image: cAdvisor's collector built from its library module by
# offline/go-build (the build context; offline/src/cadvisor says why not the cmd module), at
# /usr/bin/cadvisor with entrypoint -logtostderr like upstream, wget for the healthcheck.
ARG BASE=wirelab/python-base:bookworm
FROM ${BASE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends wget \
    && rm -rf /var/lib/apt/lists/*
COPY cadvisor /usr/bin/
EXPOSE 8080
ENTRYPOINT ["/usr/bin/cadvisor", "-logtostderr"]
