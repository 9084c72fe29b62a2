# syntax=docker/dockerfile:1
# The kflare controller image: `kflare run` as user 65532, on a read-only root filesystem.
#
#   docker build -t kflare .
#   hack/image.sh            (podman, with a local base made from Debian's packages)
#
# Distroless-style: the runtime stage is built FROM scratch and holds the interpreter, the shared libraries it
# loads, the standard library, kflare's venv and CA certificates, and nothing to run but them: no shell, no package
# manager, no pip. The base (the official Python image) only builds it.
#
# At run time nothing is written outside /tmp (mount an emptyDir there: the listeners' TLS setup and kubeconfig
# handling use temporary files). Bytecode is compiled here, and PYTHONDONTWRITEBYTECODE keeps Python from trying
# to write it at run time.

# The base is a build argument for builds without access to the public image (hack/image.sh makes an equivalent
# one from Debian's packages); the default is the official image, which the dependency bot pins by digest (its
# pinDigests setting in renovate.json), so that a rebuild takes the same base until a reviewed update moves it.
ARG BASE=python:3.11-slim
FROM ${BASE} AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

# The kflare wheel, built from the source alone, by the build backend of requirements/build.lock (pip, setuptools
# and wheel, checked against their hashes) rather than whichever version an isolated build would fetch.
FROM base AS wheel
WORKDIR /src
COPY requirements/build.lock /tmp/build.lock
RUN pip install --no-compile --require-hashes -r /tmp/build.lock
COPY pyproject.toml README.md ./
COPY app ./app
COPY webhooks ./webhooks
COPY reconcilers ./reconcilers
RUN pip wheel --no-deps --no-build-isolation --wheel-dir /wheels .

# The venv, and under /rootfs everything the runtime stage holds.
FROM base AS build
# 1. The dependencies, from requirements/run.lock only: this layer is rebuilt when they change, not when the code
# does. Every one is pinned, and checked against its hashes, at the versions the tests ran against (dev.lock's). The
# venv is made by the interpreter's real path, the one the runtime stage keeps (python is a symlink on both bases).
COPY requirements/run.lock /tmp/kflare/run.lock
RUN "$(python -c 'import os, sys; print(os.path.realpath(sys.executable))')" -m venv --without-pip /opt/kflare \
    && pip --python /opt/kflare/bin/python install --no-compile --require-hashes -r /tmp/kflare/run.lock \
    && rm -rf /tmp/kflare

# 2. kflare itself. The wheel is copied rather than bind-mounted from its stage: every builder caches a COPY by its
# content (buildah's bind mounts from a cached stage come up empty), and the copy, a few hundred KiB, is all the
# layer keeps of it.
COPY --from=wheel /wheels /tmp/wheels
RUN pip --python /opt/kflare/bin/python install --no-compile --no-deps --no-index /tmp/wheels/*.whl \
    && rm -rf /tmp/wheels

# 3. The runtime's root filesystem: the interpreter and the shared libraries it loads, the standard library less
# what kflare never runs, the venv less test suites, C sources and type stubs, CA certificates, /etc/passwd, /tmp,
# all compiled to bytecode, and which Debian packages the files come from (hack/image-rootfs.py says what and why).
COPY hack/image-rootfs.py /tmp/image-rootfs.py
RUN /opt/kflare/bin/python /tmp/image-rootfs.py /rootfs

# The runtime: the interpreter, the venv and what they load; no shell, no package manager, no pip.
FROM scratch
COPY --from=build /rootfs /
ENV PATH=/opt/kflare/bin:/usr/local/bin:/usr/bin:/bin \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
WORKDIR /tmp
USER 65532:65532
# webhooks, metrics, probes
EXPOSE 9443 8080 8081
ENTRYPOINT ["kflare", "run"]
