"""Errors under /api/ answer in JSON, like the API's own refusals; every other path keeps
Django's pages.

A script that gets a 404, a 403, a failed CSRF check or a 500 from the API reads the
reason as it reads a 400, instead of parsing an HTML page (urls.py names these handlers,
settings.py the CSRF one).
"""

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse
from django.views import csrf, defaults

API_PREFIX = "/api/"


def _api(request) -> bool:
    return request.path_info.startswith(API_PREFIX)


def bad_request(request, exception):
    if _api(request):
        if isinstance(exception, RequestDataTooBig):
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            return JsonResponse({"error": f"the request body is larger than {limit} bytes"}, status=400)
        return JsonResponse({"error": "bad request"}, status=400)
    return defaults.bad_request(request, exception)


def forbidden(request, exception):
    if _api(request):
        return JsonResponse({"error": f"forbidden: {exception}" if str(exception) else "forbidden"}, status=403)
    return defaults.permission_denied(request, exception)


def not_found(request, exception):
    if _api(request):
        return JsonResponse({"error": f"not found: {request.path_info}"}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request):
    if _api(request):
        return JsonResponse({"error": "server error: the request failed, it was logged"}, status=500)
    return defaults.server_error(request)


def csrf_failure(request, reason=""):
    if _api(request):
        return JsonResponse(
            {"error": f"CSRF check failed ({reason}): send the csrftoken cookie's value as X-CSRFToken"}, status=403
        )
    return csrf.csrf_failure(request, reason)
