"""The persona layer: the tool loop (``persona``), its results (``reply``, ``events``), the
conversation store and history sanitiser (``history``, ``sanitize``), citations, and persona
files (``loader``). Import from the submodules, or from :mod:`generic_framework` itself."""
