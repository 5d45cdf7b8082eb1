"""Static files as WhiteNoise serves them, in both modes (daphne serves no static file itself).

collectstatic (run by `runembedded` and `make web`) writes each file under a name that
holds its content hash, plus .gz and .br copies; WhiteNoise picks the copy the browser
accepts. A hashed name never changes content, so browsers may keep it for a year (the
longest period HTTP/1.1 caches are told to honour, RFC 9111 §5.3) without asking again.
"""

from whitenoise.middleware import WhiteNoiseMiddleware


class StaticFiles(WhiteNoiseMiddleware):
    FOREVER = 365 * 24 * 60 * 60
