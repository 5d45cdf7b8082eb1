"""Every error the engine raises about its input is a CrsError, so a caller (the command
line, a web view, a worker) catches one type and shows its message:

* CrsError
  - SnapshotError  a snapshot key is missing, unknown, mistyped or out of range; the message names it
  - RuleError      a rule names an unknown guest or node, or contradicts another
  - SourceError    a cluster cannot be reached, or answers with data we must refuse
    - ConfigError  an adapter config has a missing, unknown, mistyped or out-of-range key

Bad command-line options are not among them: argparse refuses those (exit 2, with usage).
"""


class CrsError(Exception):
    """Raised when the engine is given something it must not guess about."""


class SnapshotError(CrsError):
    """Raised when a snapshot key is missing, unknown, of the wrong type or out of range."""


class RuleError(CrsError):
    """Raised when a rule names an unknown guest or node, or is malformed."""


class SourceError(CrsError):
    """Raised when the cluster cannot be reached or answers with data we must refuse."""


class ConfigError(SourceError):
    """Raised when an adapter config has a missing, unknown, mistyped or out-of-range key."""
