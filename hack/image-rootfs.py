"""Gathers the image's whole root filesystem under one directory, from the build stage it runs in: the interpreter and
the shared libraries it and the venv's extensions load, the standard library without what kflare never runs, the
venv, CA certificates, a passwd entry for user 65532 and /tmp. No shell, no package manager, no pip: the runtime
stage of the Dockerfile is `FROM scratch` with this directory copied in.

    /opt/kflare/bin/python image-rootfs.py ROOT

Run by the venv's python (made by the interpreter's real path, not a symlink to it), on either base the Dockerfile
takes: the official python:3.X-slim (the interpreter in /usr/local) or hack/image.sh's Debian one (in /usr). Which
files come from a Debian package is recorded the way distroless images record it, one control file per package in
/var/lib/dpkg/status.d/ (with the checksums of the files kept, and the package's copyright file), so that an SBOM
generator such as syft lists those packages; the Python packages it finds in the venv's dist-info directories.

Every module is compiled to bytecode checked against nothing (unchecked-hash .pyc), so that the interpreter never
looks at the sources' timestamps, which the copies between stages need not keep, and never compiles at run time.
"""

from __future__ import annotations

import compileall
import json
import os
import py_compile
import re
import shutil
import ssl
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

# Standard library packages and modules kflare never imports at run time: test suites, IDLE, Tk, the installers of
# pip and venvs, 2to3, the interactive help's data, and those that would bring shared libraries nothing else needs
# (curses, readline, sqlite, dbm, crypt, nis).
STDLIB_PRUNED = {
    "test",
    "idlelib",
    "tkinter",
    "turtle.py",
    "turtledemo",
    "ensurepip",
    "venv",
    "lib2to3",
    "pydoc_data",
    "distutils",
    "curses",
    "sqlite3",
    "dbm",
    "crypt.py",
    "site-packages",  # the official image's pip, setuptools and wheel
    "dist-packages",
    "__phello__",
}
STDLIB_PRUNED_PREFIXES = ("config-",)  # the static library and Makefile for building extensions
EXTENSIONS_PRUNED = re.compile(
    r"^(_test\w*|_ctypes_test|xxlimited\w*|_xx\w+|xxsubtype|_curses\w*|readline|_sqlite3|_dbm|_gdbm|_crypt|nis"
    r"|ossaudiodev|spwd|_tkinter)\."
)
# In the venv's packages: test suites, sources of compiled extensions, type stubs, caches.
VENV_PRUNED_DIRS = {"tests", "test"}
VENV_PRUNED_SUFFIXES = (".pyi", ".pyx", ".pxd", ".pxi", ".c", ".h", ".cpp")
OWN_PACKAGES = {"app", "webhooks", "reconcilers"}  # kflare's: kept whole
MESSAGE_PACKAGES = {"envoy", "udpa", "xds", "validate"}
"""xds-protos's: a module for every message of Envoy's API (about 18 MiB), of which the process loads a few dozen
(those it encodes and what they import). Only the modules that importing the process loads are kept."""
PROCESS_MODULES = ("app.cli", "app.server", "app.xds")
NOT_PRECOMPILED = re.compile(r"/kubernetes_asyncio/client/(api|models)/")
"""kubernetes-asyncio's generated API and models (20 MiB of bytecode) load only for a kubeconfig kflare's own reader
cannot take (an exec plugin, say), never in a pod: that rare start compiles them in memory instead."""
VENV_PROGRAMS = re.compile(r"^(python[\d.]*|kflare)$")

PASSWD = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
GROUP = "root:x:0:\nnonroot:x:65532:\n"
# Without this file glibc asks DNS before /etc/hosts, and takes its "no such name" for an answer.
NSSWITCH = "".join(
    f"{database}: {sources}\n"
    for database, sources in [
        ("passwd", "files"),
        ("group", "files"),
        ("shadow", "files"),
        ("hosts", "files dns"),
        ("networks", "files"),
        ("protocols", "files"),
        ("services", "files"),
    ]
)


class Root:
    """The directory being filled, and the files of this stage's filesystem copied into it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.placed: set[str] = set()  # this stage's paths copied, with their parent directories resolved

    def at(self, path: str) -> Path:
        return self.path / path.lstrip("/")

    def place(self, path: str) -> str:
        """Copy one file or symlink (and what it points to) to the same path under the root, through the same
        symlinked directories (/lib -> usr/lib); returns the path of the file it ends at."""
        parts = Path(path).parts[1:]
        here = "/"
        for i, part in enumerate(parts):
            there = os.path.join(here, part)
            target = self.at(there)
            if os.path.islink(there):
                link = os.readlink(there)
                if not os.path.lexists(target):
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.symlink(link, target)
                resolved = os.path.normpath(os.path.join(here, link))
                return self.place(os.path.join(resolved, *parts[i + 1 :]))
            if i == len(parts) - 1:
                if os.path.isdir(there):
                    target.mkdir(parents=True, exist_ok=True)
                elif not os.path.lexists(target):
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(there, target)
                self.placed.add(there)
                return there
            if not target.exists():
                target.mkdir(parents=True)
                shutil.copystat(there, target)
            here = there
        return here

    def tree(self, path: str, keep: Callable[[str, str], bool]) -> None:
        """Copy a directory (a real path: no symlinked parents), keeping what keep(directory, name) allows; symlinks
        in it are copied as they are, with what they point to, and dangling ones left out."""
        self.place(path)
        for top, dirs, files in os.walk(path):
            dirs[:] = [d for d in dirs if keep(top, d)]
            for name in dirs + [f for f in files if keep(top, f)]:
                source = os.path.join(top, name)
                if os.path.islink(source) and not os.path.exists(source):
                    continue
                if name in dirs and not os.path.islink(source):
                    self.at(source).mkdir(exist_ok=True)
                    shutil.copystat(source, self.at(source))
                else:
                    self.place(source)

    def write(self, path: str, text: str, mode: int = 0o644) -> None:
        target = self.at(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        target.chmod(mode)


def libraries(elf: str) -> list[str]:
    """The shared libraries the dynamic loader maps for an executable or a shared object, and the loader."""
    done = subprocess.run(["ldd", elf], capture_output=True, text=True, check=False)
    if "not a dynamic executable" in done.stdout + done.stderr:
        return []
    assert done.returncode == 0, f"ldd {elf}: {done.stderr}"
    found = []
    for line in done.stdout.splitlines():
        if "not found" in line:
            # Not on the base either (libstdc++ for frozenlist's): the module falls back to its pure Python
            # version there as here, or fails to import in both.
            print(f"rootfs: {elf} needs {line.split()[0]}, which this stage lacks", file=sys.stderr)
            continue
        match = re.search(r"=>\s*(/\S+)", line) or re.match(r"\s*(/\S+)\s+\(", line)
        if match:
            found.append(match.group(1))
    return found


def is_elf(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def canonical(path: str) -> str:
    """A path with its directories' symlinks resolved, the file's own name kept: how dpkg's lists and the files
    placed here are matched whatever the /usr merge left as symlinks."""
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def record_debian_packages(root: Root, extra: set[str]) -> list[str]:
    """status.d/<package> (the package's stanza), its md5sums of the files kept, and its copyright file, for every
    Debian package a placed file comes from (and the extra ones, whose files are generated: the CA bundle)."""
    info = Path("/var/lib/dpkg/info")
    status = Path("/var/lib/dpkg/status")
    if not status.exists():
        return []
    owner: dict[str, str] = {}
    for listing in info.glob("*.list"):
        package = listing.name.removesuffix(".list")
        for line in listing.read_text(errors="replace").splitlines():
            if line and line != "/." and not os.path.isdir(line):
                owner[canonical(line)] = package
    placed = {canonical(p) for p in root.placed}
    packages = {owner[p] for p in placed if p in owner} | extra
    stanzas = {}
    for stanza in status.read_text().split("\n\n"):
        fields = dict(re.findall(r"^(Package|Architecture): (\S+)$", stanza, re.M))
        if "Package" in fields:
            stanzas[fields["Package"]] = stanzas[f"{fields['Package']}:{fields.get('Architecture')}"] = stanza.strip()
    names = []
    for package in sorted(packages):
        name = package.partition(":")[0]
        stanza = stanzas.get(package) or stanzas[name]
        root.write(f"/var/lib/dpkg/status.d/{name}", stanza + "\n")
        sums = info / f"{package}.md5sums"
        if sums.exists():
            kept = [line for line in sums.read_text().splitlines() if canonical("/" + line.split(None, 1)[1]) in placed]
            root.write(f"/var/lib/dpkg/status.d/{name}.md5sums", "".join(f"{line}\n" for line in kept))
        copyright = f"/usr/share/doc/{name}/copyright"
        if os.path.exists(copyright):
            root.place(copyright)
        names.append(name)
    return names


def compile_bytecode(root: Path, paths: list[str], workers: int = 0) -> None:
    """Bytecode for every module under these paths of the root, unchecked-hash, and naming the source by its path
    in the image (tracebacks show /opt/kflare/..., not the root's); any older bytecode is dropped first. `workers`
    processes compile (0: one per CPU; 1: this process, for a caller whose threads make forking unsafe)."""
    for path in paths:
        for top, dirs, _ in os.walk(root / path.lstrip("/")):
            if "__pycache__" in dirs:
                dirs.remove("__pycache__")
                shutil.rmtree(os.path.join(top, "__pycache__"))
        ok = compileall.compile_dir(
            str(root / path.lstrip("/")),
            quiet=1,
            workers=workers,
            stripdir=str(root),
            prependdir="/",
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
            rx=NOT_PRECOMPILED,
        )
        assert ok, f"{path}: some modules do not compile"


def _parents(path: str) -> list[str]:
    out = []
    while (parent := os.path.dirname(path)) != path:
        out.append(parent)
        path = parent
    return out


def loaded_files(modules: tuple[str, ...]) -> set[str]:
    """The real paths of every module file the venv's interpreter loads when it imports `modules`."""
    code = (
        "import json, os, sys\n"
        f"for name in {list(modules)!r}: __import__(name)\n"
        "print(json.dumps(sorted({os.path.realpath(f) for m in list(sys.modules.values())"
        " if (f := getattr(m, '__file__', None))})))"
    )
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"importing {', '.join(modules)} failed:\n{done.stderr}"
    return set(json.loads(done.stdout))


def main(rootdir: str) -> None:
    assert sys.prefix != sys.base_prefix, "run by the venv's python"
    root = Root(Path(rootdir))
    venv = os.path.realpath(sys.prefix)
    interpreter = os.path.realpath(sys.executable)
    stdlib = os.path.realpath(sysconfig.get_path("stdlib"))
    dynload = os.path.realpath(sysconfig.get_config_var("DESTSHARED"))

    # The interpreter and the standard library.
    root.place(interpreter)

    def stdlib_keeps(top: str, name: str) -> bool:
        if top == stdlib:
            return name not in STDLIB_PRUNED and not name.startswith(STDLIB_PRUNED_PREFIXES)
        if top == dynload:
            return not EXTENSIONS_PRUNED.match(name)
        return name != "__pycache__"

    root.tree(stdlib, stdlib_keeps)
    if not dynload.startswith(stdlib + os.sep):
        root.tree(dynload, stdlib_keeps)

    # The venv: its interpreter links, kflare's program, and its packages less tests, sources and caches.
    programs = os.path.join(venv, "bin")
    loaded = loaded_files(PROCESS_MODULES)
    loaded_dirs = {os.path.dirname(f) for f in loaded}
    loaded_dirs |= {d for f in loaded_dirs for d in _parents(f)}

    def venv_keeps(top: str, name: str) -> bool:
        if top == programs:
            return bool(VENV_PROGRAMS.match(name))
        if name == "__pycache__":
            return False
        package = Path(top, name).relative_to(venv).parts[3:4]
        if package in [(own,) for own in OWN_PACKAGES]:
            return True
        inside = Path(top, name).relative_to(venv).parts
        if package in [(messages,) for messages in MESSAGE_PACKAGES] and len(inside) > 4:
            path = os.path.realpath(os.path.join(top, name))
            return path in loaded_dirs if os.path.isdir(path) else path in loaded
        if name in VENV_PRUNED_DIRS and os.path.isdir(os.path.join(top, name)):
            return False
        return not name.endswith(VENV_PRUNED_SUFFIXES)

    root.tree(venv, venv_keeps)

    # The shared libraries all of it loads (glibc's loader resolves them here as it did in this stage), and
    # libgcc_s, which glibc opens itself when a thread is cancelled or exits early.
    elves = [interpreter] + [p for p in sorted(root.placed) if ".so" in os.path.basename(p) and is_elf(p)]
    needed = {lib for elf in elves for lib in libraries(elf)}
    for lib in sorted(needed):
        if not lib.startswith(venv + os.sep):  # the wheels' own (cffi.libs/ and the like) are in already
            root.place(lib)
    libc = next(lib for lib in needed if os.path.basename(lib).startswith("libc.so"))
    gcc_s = os.path.join(os.path.dirname(libc), "libgcc_s.so.1")
    if os.path.exists(gcc_s):
        root.place(gcc_s)
    # The loader's cache, for libraries outside its built-in directories (the official image's libpython).
    for conf in ["/etc/ld.so.conf", *map(str, Path("/etc/ld.so.conf.d").glob("*.conf"))]:
        if os.path.exists(conf):
            root.place(conf)
    subprocess.run(["ldconfig", "-X", "-r", str(root.path)], check=True)

    # CA certificates, where OpenSSL looks by default.
    paths = ssl.get_default_verify_paths()
    bundle = "/etc/ssl/certs/ca-certificates.crt"
    if os.path.exists(bundle):
        root.place(bundle)
        cafile = paths.openssl_cafile
        if cafile != bundle and not os.path.lexists(root.at(cafile)):
            root.at(cafile).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(bundle, root.at(cafile))

    # Users, name service, the OS's identity (for SBOM generators), /tmp.
    root.write("/etc/passwd", PASSWD)
    root.write("/etc/group", GROUP)
    root.write("/etc/nsswitch.conf", NSSWITCH)
    for path in ("/etc/os-release", "/etc/protocols", "/etc/services"):
        if os.path.exists(path):
            root.place(path)
    for path, mode in (("tmp", 0o1777), ("home/nonroot", 0o755)):
        (root.path / path).mkdir(parents=True, exist_ok=True)
        (root.path / path).chmod(mode)
    os.chown(root.path / "home/nonroot", 65532, 65532)

    packages = record_debian_packages(root, {"ca-certificates"} if os.path.exists(bundle) else set())

    compile_bytecode(root.path, [stdlib, venv])

    size = sum(os.lstat(os.path.join(t, f)).st_size for t, _, fs in os.walk(root.path) for f in fs)
    print(f"rootfs: {size / 2**20:.0f} MiB; Debian packages: {' '.join(packages) or 'none'}", file=sys.stderr)


if __name__ == "__main__":
    main(*sys.argv[1:])
