"""Every bad-input error the engine raises is a CrsError:

* CrsError
  - SnapshotError  a key is missing, unknown or out of range; the message names it
  - RuleError      a rule names an unknown guest or node, or contradicts another
"""


class CrsError(Exception):
    """Raised when the engine is given something it must not guess about."""


class SnapshotError(CrsError):
    """Raised when a snapshot key is missing, unknown, of the wrong type or out of range."""


class RuleError(CrsError):
    """Raised when a rule names an unknown guest or node, or is malformed."""
