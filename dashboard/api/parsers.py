"""The API's JSON parser: a body is read as every JSON entry of the product reads it."""

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from crs.fields import read_json


class StrictJSONParser(JSONParser):
    """JSON through crs.fields.read_json: NaN, 1e400, a key given twice, NUL and nesting beyond 1024
    are refused with the key named (REST framework's parser takes most of them); the body is held
    to DATA_UPLOAD_MAX_MEMORY_SIZE as Django holds a form's."""

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read() if limit is None else stream.read(limit + 1)
        if limit is not None and len(raw) > limit:
            raise ParseError(f"the request body is larger than {limit} bytes")
        return read_json(raw, ParseError, "body")
