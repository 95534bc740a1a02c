"""What every command's help ends with (the command line's exit codes)."""

__all__ = ["EPILOG"]

EPILOG = "Exit codes: 0 success, 1 upstream or runtime error, 2 usage or configuration error."
