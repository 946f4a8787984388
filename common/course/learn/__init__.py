"""`uv run learn`: write the course's key functions yourself (cli), checked in a fresh process (check),
by editing the course's files function by function (source)."""
