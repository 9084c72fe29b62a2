# syntax=docker/dockerfile:1
# The kflare controller image: `kflare run` as user 65532, on a read-only root filesystem.
#
#   docker build -t kflare .
#   hack/image.sh            (podman, with a local base made from Debian's packages)
#
# At run time nothing is written outside /tmp (mount an emptyDir there: the listeners' TLS setup and kubeconfig
# handling use temporary files). Bytecode is compiled here, and PYTHONDONTWRITEBYTECODE keeps Python from trying
# to write it at run time.

# The base is a build argument for builds without access to the public image (hack/image.sh makes an equivalent
# one from Debian's packages); the default is the official image.
ARG BASE=python:3.11-slim
FROM ${BASE} AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

# The kflare wheel, built from the source alone.
FROM base AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
COPY webhooks ./webhooks
COPY reconcilers ./reconcilers
RUN pip wheel --no-deps --wheel-dir /wheels .

FROM base
# 1. The dependencies, from pyproject.toml only: this layer is rebuilt when they change, not when the code does.
COPY pyproject.toml /tmp/kflare/pyproject.toml
RUN python -m venv --without-pip /opt/kflare \
    && python -c 'import sys, tomllib; print(*tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"], sep="\n")' \
        /tmp/kflare/pyproject.toml > /tmp/kflare/requirements.txt \
    && pip --python /opt/kflare/bin/python install -r /tmp/kflare/requirements.txt \
    && rm -rf /tmp/kflare

# 2. kflare itself. pip compiles what it installs; the base image ships the standard library without bytecode.
# The wheel is copied rather than bind-mounted from its stage: every builder caches a COPY by its content (buildah's
# bind mounts from a cached stage come up empty), and the copy, a few hundred KiB, is all the layer keeps of it.
COPY --from=wheel /wheels /tmp/wheels
RUN pip --python /opt/kflare/bin/python install --no-deps --no-index /tmp/wheels/*.whl \
    && rm -rf /tmp/wheels \
    && python -m compileall -q -j 0 "$(python -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')"

ENV PATH=/opt/kflare/bin:$PATH
WORKDIR /tmp
USER 65532:65532
# webhooks, metrics, probes
EXPOSE 9443 8080 8081
ENTRYPOINT ["kflare", "run"]
