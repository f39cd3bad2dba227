"""Performance benchmarks of neta_jupyter: ``python -m benchmarks [B1 B3 ...] [--quick]``.

Every figure is measured against a bare baseline in the same run (a plain tornado server sending
the same pre-serialised frames, or a plain SQLite scan of the same rows), so the table reads as
"how much of what the machine can do do we keep". The server under test is a real
``jupyter server`` subprocess; clients run in this process; server CPU and memory are read from
``/proc`` from outside. See ``benchmarks/README.md``.
"""
