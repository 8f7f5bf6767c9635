"""Builds the native read path as a plain C shared library inside the package.

It is compiled as a setuptools Extension only to reuse setuptools' compiler driver: the library
has no Python module init and includes no Python header; pulsar-throttled-source loads it with
ctypes. One build serves every CPython 3.10+ (tagged abi3).

Its version is pulsar-throttled-source's (pulsar_throttled_source.__version__, the one place it is
written), which pulsar-throttled-source[native] pins: read from the checkout beside this folder, or
from PULSAR_THROTTLED_SOURCE_VERSION (native/build_wheels.py, which builds from a copy of this
folder), or from the PKG-INFO of an sdist."""

import os
import re
from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).resolve().parent


def version() -> str:
    if os.environ.get("PULSAR_THROTTLED_SOURCE_VERSION"):
        return os.environ["PULSAR_THROTTLED_SOURCE_VERSION"]
    for source, pattern in ((HERE.parent / "pulsar_throttled_source" / "__init__.py", r'^__version__ = "([^"]+)"$'),
                            (HERE / "PKG-INFO", r"^Version: (\S+)$")):
        if source.is_file() and (found := re.search(pattern, source.read_text(), re.M)):
            return found.group(1)
    raise SystemExit("pulsar-throttled-source-native: no version found: build it from the repository's native/ folder "
                     "or set PULSAR_THROTTLED_SOURCE_VERSION")


setup(
    version=version(),
    ext_modules=[
        Extension(
            "pulsar_throttled_native._pulsar_arrow_reader",
            # One file per job (src/par_internal.h lists them); every .c of src/ is the library, and its headers
            # (par_internal.h, send_internal.h) go into the sdist as its depends.
            sources=sorted(f"src/{p.name}" for p in (HERE / "src").glob("*.c")),
            depends=sorted(f"src/{p.name}" for p in (HERE / "src").glob("*.h")),
            extra_compile_args=["-O2", "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-fvisibility=hidden",
                                "-Wall", "-Wextra", "-Werror"],
            libraries=["dl", "pthread"],
            py_limited_api=True,
        )
    ],
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
