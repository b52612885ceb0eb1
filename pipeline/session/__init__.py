"""The session's vocabulary, which every wing stands on: `SessionState` (`state`), what a
transition decides (`step`), what travels into the log and out of it (`wire`), its timers,
how a call ends, recording consent, why a request is refused, the order of its events and
the redaction of what a host types into it (`redaction`, through `pipeline.privacy`).

Not in `pipeline.call`: the state names each wing's parts, and `call` names no provider."""
