"""Render stage: the Markdown report, its charts and the memory section."""
