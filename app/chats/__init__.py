"""Conversations: the SQLite store, opening it whatever state it is in, and exporting a chat."""
