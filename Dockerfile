# syntax=docker/dockerfile:1
# The kflare controller image: `kflare run` as user 65532, on a read-only root filesystem.
#
#   docker build -t kflare .
#
# At run time nothing is written outside /tmp (mount an emptyDir there: the listeners' TLS setup and kubeconfig
# handling use temporary files). Bytecode is compiled here, and PYTHONDONTWRITEBYTECODE keeps Python from trying
# to write it at run time.

FROM python:3.11-slim AS base
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
RUN --mount=type=bind,from=wheel,source=/wheels,target=/wheels \
    pip --python /opt/kflare/bin/python install --no-deps --no-index /wheels/*.whl \
    && python -m compileall -q -j 0 /usr/local/lib/python3.11

ENV PATH=/opt/kflare/bin:$PATH
WORKDIR /tmp
USER 65532:65532
# webhooks, metrics, probes
EXPOSE 9443 8080 8081
ENTRYPOINT ["kflare", "run"]
