"""Sensitive values in what callers say: found, masked, and gated as transcripts stream.

`detect` finds and masks (cards, SSNs, e-mail addresses, phone numbers, IBANs), `stream` holds a
transcript's deltas back while they could be the start of one, and `policy` is what a session
asks for; `sealing` seals what is kept, and `boundary` is where a call's words cross into
what is stored and sent. Pure, like the rest of `pipeline/`.

What uses these rules lives where it acts: recording consent (`pipeline.session.consent`), the
redaction of what a host types into a call (`pipeline.session.redaction`), a keypad capture
nobody hears (`pipeline.keypad.capture`), and erasing a session's content
(`pipeline.records.erasure`).
"""
