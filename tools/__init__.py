"""Development tools of the checkout, never part of the wheel or the sdist (pyproject.toml packages only
pulsar_throttled_source). Run from the repository root: python -m tools.<module>"""
