"""The source's options: one table of what exists (spec), parsed and validated into a frozen SourceOptions.

Spark hands options over lowercased and as strings. Every check names the option and what is
allowed, so a typo fails the query at load(), not hours later. Secrets (auth parameters, tokens)
are kept out of repr and error messages.
- ``spec``: the one table of options (the option reference, docs/reference/options.md, and the data source's docstring are generated from it).
- ``aliases``: Spark's Kafka source's and pulsar-spark's option names, accepted as ours or refused naming ours;
  ``names``: an unknown option's error, with the closest options and what they do.
- ``parse``: parse_options, the rules across options; ``start_end``: where a query starts and a batch query
  ends (startingOffsets/startingTime, endingOffsets/endingTime); ``values``: one option read by its spec;
  ``passthrough``: pulsar.client.* / pulsar.reader.* / pulsar.admin.* settings; ``auth``: authentication.
- ``source_options``: SourceOptions, StartSpec, EndSpec, and what the options give a read task and an admin session.
- ``query_kinds``: which options a stream, a batch query and each Spark line take, checked in one place each.
"""

from __future__ import annotations

from .parse import parse_options
from .source_options import EndSpec, QuotaSource, SourceOptions, StartSpec
from .spec import OPTIONS, PREFIX_OPTIONS, SETTINGS, SPECS, OptionSpec, SettingSpec

__all__ = ["OPTIONS", "PREFIX_OPTIONS", "SETTINGS", "SPECS", "OptionSpec", "QuotaSource", "SettingSpec",
           "SourceOptions", "StartSpec", "EndSpec", "parse_options"]
