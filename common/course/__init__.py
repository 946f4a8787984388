"""The tools around the lessons: `uv run learn`, the exercises' helpers, the reference runs."""
