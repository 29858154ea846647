"""Widgets and pages. GUI thread only."""
