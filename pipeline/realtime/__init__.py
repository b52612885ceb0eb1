"""OpenAI's Realtime API: the wing of what only Realtime has."""
