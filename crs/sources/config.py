"""Reading an adapter's configuration: every key checked once, every refusal named.

Configs come from the dashboard's cluster settings or the command line as plain
JSON objects. A typo must not silently fall back to a default, so unknown keys are
refused too, with the list of allowed ones.
"""

from __future__ import annotations

from ..errors import ConfigError as ConfigError  # re-exported: the adapters raise cfg.ConfigError
from ..fields import Fields

_fields = Fields(ConfigError)
refuse_unknown = _fields.refuse_unknown
number = _fields.number
integer = _fields.integer
text = _fields.text
boolean = _fields.boolean
choice = _fields.choice
