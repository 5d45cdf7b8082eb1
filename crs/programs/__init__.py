"""The command-line programs (`python -m crs ...`): parse, call the engine, print."""
