#!/usr/bin/env python3
"""Symbol and dependency hygiene of the shared objects a host program loads.

  symbols_check.py LIBTETHER [PLUGIN [OTHER_LIBRARY...]]

libtether.so exports tether's API only (lib/tether.map): every dynamic symbol
it defines is in namespace tether (a function, or a class's vtable, typeinfo,
thunk) or a tether_* C function, and none names Boost.Asio or fmt, so nothing
in it can clash with a host program's own Boost or fmt; tether::Error's
typeinfo stays exported (one type across the boundary). The NVSHMEM plug-in,
when given, loads at most MAX_PLUGIN_LIBS shared objects (ldd, the vDSO not
counted) and none of libpmix, libibverbs and what they pull in: those are
opened when first used (lib/base/lazy_library.hpp). Other libraries given
(libtether-fakeverbs) must export tether's names only, like libtether.
"""
import re
import subprocess
import sys

MAX_PLUGIN_LIBS = 9
SANITIZER_RUNTIMES = ("libasan.so", "libubsan.so", "libtsan.so", "liblsan.so")
LAZY = ("libpmix", "libibverbs", "libhwloc", "libmunge", "libevent", "libnl-", "libudev")
ALLOWED = re.compile(
    r"^(?:(?:vtable|VTT|typeinfo|typeinfo name|guard variable) for |(?:non-)?virtual thunk to )?tether::"
    r"|^tether_")


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def exported(path):
    out = subprocess.run(["nm", "-D", "--defined-only", "-C", path], check=True, capture_output=True, text=True)
    names = []
    for line in out.stdout.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3:
            names.append(parts[2])
    return names


def check_library(path, api=True):
    names = exported(path)
    if not names:
        fail(f"{path} exports nothing")
    foreign = [n for n in names if not ALLOWED.match(n)]
    if foreign:
        fail(f"{path} exports {len(foreign)} symbols outside namespace tether / tether_*, e.g.:\n  " +
             "\n  ".join(foreign[:20]))
    leaked = [n for n in names if "boost::" in n or "fmt::" in n]
    if leaked:
        fail(f"{path} exports {len(leaked)} symbols naming boost:: or fmt::, e.g.:\n  " + "\n  ".join(leaked[:20]))
    for needed in ("typeinfo for tether::Error", "tether_init", "tether::toString(tether::ErrorCode)") if api else ():
        if needed not in names:
            fail(f"{path} does not export {needed!r}")
    print(f"{path}: {len(names)} exported symbols, all tether's")


def check_plugin(path):
    out = subprocess.run(["ldd", path], check=True, capture_output=True, text=True).stdout
    # The vDSO and a sanitizer's runtime (ASan/UBSan/TSan builds) are not the plug-in's own.
    libs = [
        line.split()[0]
        for line in out.splitlines()
        if line.strip() and "linux-vdso" not in line and not line.split()[0].startswith(SANITIZER_RUNTIMES)
    ]
    lazy = [lib for lib in libs if lib.startswith(LAZY)]
    if lazy:
        fail(f"{path} loads {', '.join(lazy)} at dlopen; they must be opened on first use")
    if len(libs) > MAX_PLUGIN_LIBS:
        fail(f"{path} loads {len(libs)} shared objects (more than {MAX_PLUGIN_LIBS}): {', '.join(libs)}")
    print(f"{path}: loads {len(libs)} shared objects: {', '.join(libs)}")


def main():
    if len(sys.argv) < 2:
        fail("usage: symbols_check.py LIBTETHER [PLUGIN]")
    check_library(sys.argv[1])
    if len(sys.argv) > 2:
        check_plugin(sys.argv[2])
    for other in sys.argv[3:]:
        check_library(other, api=False)


if __name__ == "__main__":
    main()
