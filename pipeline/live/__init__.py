"""The Live API (GPT-Live) wing of the pure core: its frames and durable transcripts
(`frames.py`), delegation tasks (`tasks.py`), the controls Switchboard sends (`controls.py`),
its inputs (`events.py`), what it does with them (`delegation.py`, `reports.py`), how it does
what every call does (`dialect.py`, `configuration.py`) and what it can do (`capabilities.py`)
(LIVE_PROTOCOL.md §1.3, §5.2, §5.3).

The rules, as this module states them:

- **Frames.** A Live sideband frame is DURABLE (numbered, queued, logged, deduplicated by its
  `event_id`), LIVE (fanned out, never queued: reflected audio and nested Responses deltas),
  IGNORED (known, nothing depends on it) or UNKNOWN (recorded, never acted on). The two
  transcript deltas are LIVE *and* transcript: each is fanned out at once and also buffered,
  because Live sends no final transcript — the words exist nowhere else.
- **Durable transcripts.** Buffered fragments become one durable `switchboard.live_transcript`
  event (the fragments themselves, with their event ids and timeline ranges) when the speaker
  changes, when the timeline jumps by `COALESCE_GAP_MS` or more, when the buffer spans too much
  of the timeline or holds too many fragments, when the oldest has waited `FLUSH_AFTER_MS` of
  wall time, just before a delegation is enqueued, and when the sideband closes.
- **Tasks.** A delegation carries no text. Its task is the caller's fragments that start after
  the previous delegation's offset and at or before its own `offset_ms`, in timeline order,
  each fragment once. The fragment that covers the offset (`end_ms > offset_ms`) may arrive
  just after the delegation: until it is known the task waits, at most `DELEGATION_SETTLE_MS`
  after the delegation arrived, and then goes ahead with what there is.
- **Controls** are typed models (`LiveAppend`, `InputAudio`, `SessionClose`) in the pipeline's
  `Control` union, so a transition's Live controls get their deterministic ids like Realtime's;
  `delegation_id` is always written (required and nullable on the wire), and appended content is
  bounded so the provider never refuses it. The `…_append` functions give their wire form.

Nothing here does I/O or reads a clock: wall time comes in as seconds (`now`), like an
envelope's `received_at`.
"""
