"""Builds the native read path as a plain C shared library inside the package.

It is compiled as a setuptools Extension only to reuse setuptools' compiler driver: the library
has no Python module init and includes no Python header; pulsar-throttled-source loads it with
ctypes. One build serves every CPython 3.10+ (tagged abi3)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "pulsar_throttled_native._pulsar_arrow_reader",
            sources=["src/pulsar_arrow_reader.c"],
            extra_compile_args=["-O2", "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-fvisibility=hidden",
                                "-Wall", "-Wextra", "-Werror"],
            libraries=["dl"],
            py_limited_api=True,
        )
    ],
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
