"""Outbound calls and campaigns: the decisions a contact centre dialling lists of numbers needs.

`dialing` is a call Switchboard places, from the dial to what it came to; `numbers` checks the
numbers dialled and finds their time zones; `window` is when a contact may be called, on its own
wall clock; `outcomes` is how an attempt ended and what a failed setup's code means; `retry`
whether and when a contact is dialled again, and `schedule` that with the window and the
campaign's expiry; `vars` fills a session's instructions with a contact's data, quoted so it can
never read as instructions; `contacts` reads a campaign's list from JSON or CSV, row by row;
`voicemail` tells a person from an answering machine by what the callee says first; `specs` are
the request bodies. Pure, like the rest of `pipeline/`: time is an argument.
"""
