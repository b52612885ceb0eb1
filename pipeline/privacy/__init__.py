"""Sensitive values in what callers say: found, masked, and gated as transcripts stream.

`detect` finds and masks (cards, SSNs, e-mail addresses, phone numbers, IBANs), `stream` holds a
transcript's deltas back while they could be the start of one, and `policy` is what a session
asks for. Pure, like the rest of `pipeline/`.
"""
