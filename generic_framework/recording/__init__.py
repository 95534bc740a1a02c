"""Recording and replaying fixtures: personas driven against the real endpoint or the mock.

Built on top of :mod:`generic_framework.mock` (which knows nothing of personas):
:mod:`~generic_framework.recording.recorder` captures real exchanges as fixtures with secrets
removed; :mod:`~generic_framework.recording.replay` runs fixtures through real personas against
the in-process mock.
"""
