"""The API's JSON parser: a body is read as every JSON entry of the product reads it."""

import re

from django.conf import settings
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import JSONParser

from crs.fields import read_json

FIELD = re.compile(r"(\w+): ")  # read_json names the key first: "threshold: NaN is not a number"


class StrictJSONParser(JSONParser):
    """JSON through crs.fields.read_json: NaN, 1e400, a key given twice, NUL and nesting beyond 1024
    are refused with the key named (REST framework's parser takes most of them), as `{key: [message]}`
    like any bad field when the refusal is at a key. The body is held to DATA_UPLOAD_MAX_MEMORY_SIZE
    as Django holds a form's."""

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read() if limit is None else stream.read(limit + 1)
        if limit is not None and len(raw) > limit:
            raise ParseError(f"the request body is larger than {limit} bytes")
        try:
            return read_json(raw, ParseError, "body")
        except ParseError as exc:
            message = str(exc.detail)
            if key := FIELD.match(message):  # at a setting or field: reported as the serializers do
                raise ValidationError({key.group(1): [message]}) from None
            raise
