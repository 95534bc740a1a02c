"""Benchmarks: generic_framework's client cost beside raw httpx and the peer libraries.

Run everything with ``python -m benchmarks`` (or ``make bench``); ``python -m benchmarks --quick``
runs tiny sizes for a smoke check. The package imports nothing heavy at import time: each client
runs in its own fresh process (``python -m benchmarks.run_client``) against a dedicated scripted
server (``python -m benchmarks.server``), so a peer that is not installed only skips its rows.
"""
