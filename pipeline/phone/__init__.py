"""What a phone call is: the numbers Switchboard takes and keeps (`numbers`), and what a
SIP call announces, which route answers it and why one is turned away (`sip`). What the
caller's keys do in a call is `pipeline.keypad`'s: it steps the session, this room is what the
session holds."""
