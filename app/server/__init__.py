"""The local OpenAI-compatible server: an ASGI app over an engine gateway, no Qt.

`kvstudio serve` runs it over an EngineProcess (process_gateway.py); the app runs it over its
EngineClient (app/services/server_gateway.py), so API requests queue with the chat's.
"""
