"""The chat page: conversations, the message view, input, per-chat settings, model picker."""
