"""Static files as WhiteNoise serves them, in both modes (daphne serves no static file itself).

collectstatic (run by `runembedded` and `make web`) writes each file under a name that
holds its content hash, plus .gz and .br copies; WhiteNoise picks the copy the browser
accepts. A hashed name never changes content, so browsers may keep it for a year (the
longest period HTTP/1.1 caches are told to honour, RFC 9111 §5.3) without asking again.
"""

from whitenoise.middleware import WhiteNoiseMiddleware
from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticFiles(WhiteNoiseMiddleware):
    FOREVER = 365 * 24 * 60 * 60


class StaticStorage(CompressedManifestStaticFilesStorage):
    """Only hashed names are kept, and a hashed name's compressed copies, once written, are
    right forever: so `make run` compresses only what changed since the last start (Brotli
    over every file, the admin's included, costs about 15 s of CPU)."""

    keep_only_hashed_files = True

    def compress_files(self, paths):
        return super().compress_files([path for path in paths if not self.exists(path + ".gz")])
