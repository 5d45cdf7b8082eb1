"""Time in SQL, the same on PostgreSQL and SQLite (the embedded mode): the history's buckets
(history.py) and the forecast's hours of past days (forecasts.py)."""

MINUTE, FIVE_MINUTES, HOUR = 60, 300, 3600


def bucket_sql(column: str, seconds: int, vendor: str) -> str:
    """SQL for the start of the `seconds`-long bucket (aligned to the Unix epoch) `column` falls in."""
    seconds = int(seconds)
    if vendor == "postgresql":
        return f"to_timestamp(floor(extract(epoch from {column}) / {seconds}) * {seconds})"
    epoch = epoch_sql(column, vendor)
    return f"strftime('%%Y-%%m-%%d %%H:%%M:%%S', {epoch} / {seconds} * {seconds}, 'unixepoch')"


def epoch_sql(column: str, vendor: str) -> str:
    """SQL for `column`'s whole seconds since the Unix epoch."""
    if vendor == "postgresql":
        return f"CAST(floor(extract(epoch from {column})) AS bigint)"
    # SQLite keeps datetimes as 'YYYY-MM-DD HH:MM:SS[.ffffff]' text in UTC, as Django writes them.
    # (%% because Django's cursors read the query with %-style parameters.)
    return f"CAST(strftime('%%s', {column}) AS INTEGER)"
