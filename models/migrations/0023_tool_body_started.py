"""A tool step notes when its body was first started (issue 47): a body that reaches outside the
deployment (`external`, an HTTP tool's `not_idempotent`) runs at most once, so a run redelivered
after its worker died finds the note and answers that the outcome is unknown instead of running
the body again."""

STATEMENTS = [
    "ALTER TABLE tool_steps ADD COLUMN body_started_at TIMESTAMPTZ",
]
