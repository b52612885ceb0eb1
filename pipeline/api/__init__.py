"""The app's side of Switchboard, without HTTP: what it asks (request bodies, pages,
Idempotency-Key, API keys' roles, watch tokens) and what it is told (signed webhooks in
`notify`, `signing`; event streams)."""
