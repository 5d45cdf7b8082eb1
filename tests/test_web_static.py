"""Static files as both modes serve them: collectstatic's hashed, compressed copies through
WhiteNoise, cached a year; and the page's Plotly is the small vendored bundle."""

import re

import pytest
from django.core.management import call_command
from django.templatetags.static import static
from django.test import RequestFactory, override_settings

from dashboard.staticfiles import StaticFiles

YEAR = 365 * 24 * 3600
MANIFEST = {"staticfiles": {"BACKEND": "dashboard.staticfiles.StaticStorage"}}


@pytest.fixture(scope="module")
def collected_once(tmp_path_factory):
    """One collect for the module, on the suite's static seed (harness/stack.py): a full
    compress of every file took 65 s of the main run's critical path on a busy two-core machine,
    and the seed's servers make the same files with the same storage."""
    from django.conf import settings

    from harness.stack import own_static

    root = tmp_path_factory.mktemp("static")
    own_static(root)
    with override_settings(STATIC_ROOT=root, STORAGES={**settings.STORAGES, **MANIFEST}):
        call_command("collectstatic", interactive=False, verbosity=0)
    return root


@pytest.fixture
def collected(collected_once, settings):
    with override_settings(STATIC_ROOT=collected_once, STORAGES={**settings.STORAGES, **MANIFEST}):
        yield collected_once


@pytest.mark.parametrize("encoding, suffix", [("br", ".br"), ("gzip", ".gz")])
def test_plotly_is_served_hashed_compressed_and_cached_a_year(collected, encoding, suffix):
    url = static("vendor/plotly-basic.min.js")
    assert re.fullmatch(r"/static/vendor/plotly-basic\.min\.[0-9a-f]{12}\.js", url)
    served = StaticFiles(lambda request: pytest.fail("not a static file?"))
    response = served(RequestFactory().get(url, HTTP_ACCEPT_ENCODING=f"{encoding}, identity"))
    body = b"".join(response.streaming_content)
    assert response.status_code == 200 and response["Content-Encoding"] == encoding
    assert response["Cache-Control"] == f"max-age={YEAR}, public, immutable"
    on_disk = collected / url.removeprefix("/static/")
    assert body == on_disk.with_name(on_disk.name + suffix).read_bytes()
    assert len(body) < 500_000  # the basic bundle: 1.2 MB raw, the full one was 4.8 MB


def test_vendored_plotly_is_the_basic_bundle_with_its_origin():
    from django.contrib.staticfiles import finders

    head = open(finders.find("vendor/plotly-basic.min.js"), encoding="utf-8").read(200)
    readme = open(finders.find("vendor/README.md"), encoding="utf-8").read()
    version = re.search(r"plotly\.js \(basic - minified\) v(\S+)", head).group(1)
    assert f"plotly.js-basic-dist-min@{version}" in readme and "MIT" in readme


def test_the_page_turns_fractions_into_percent_in_one_place():
    """The server sends fractions (0–1); units.js alone makes percent of them (and back)."""
    from django.conf import settings

    converting = re.compile(r"[*/]\s*100\b(?!0)")
    scripts = {p.name for p in (settings.BASE_DIR / "static").glob("*.js") if converting.search(p.read_text())}
    assert scripts == {"units.js"}
    templates = [p.name for p in (settings.BASE_DIR / "templates").rglob("*.html") if "widthratio" in p.read_text()]
    assert templates == []
