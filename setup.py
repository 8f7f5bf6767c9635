"""A thin shim over pyproject.toml, which holds all of the project's metadata and build settings
(PEP 621, setuptools): this file adds nothing, so `pip install .` and the wheel are the same with
or without it. It is here for the tools and readers that look for a top-level setup.py."""

from setuptools import setup

setup()
