"""Serves plotly.min.js from the installed plotly package: no CDN, and no copy in the repo
that could drift from the Python package's version (the page must work air-gapped)."""

from pathlib import Path

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_JS = "plotly.min.js"
PACKAGE_DATA = Path(plotly.__file__).resolve().parent / "package_data"


class PlotlyFinder(BaseFinder):
    storage = FileSystemStorage(location=PACKAGE_DATA)

    def check(self, **kwargs):
        return []

    def find(self, path, find_all=False, **kwargs):
        if path != PLOTLY_JS:
            return [] if find_all else None
        found = str(PACKAGE_DATA / PLOTLY_JS)
        return [found] if find_all else found

    def list(self, ignore_patterns):
        yield PLOTLY_JS, self.storage
