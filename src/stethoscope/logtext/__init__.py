"""The text-log engine: line shapes, tokens, step counters, units and the native line scanner.

It knows no log format by name (a grammar, not a list): `stethoscope.importers` holds the formats, one
file each, and their registry, on top of it. The engine imports only records, errors, config, the pure
name rules of `detect` and itself.
"""
