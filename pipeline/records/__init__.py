"""What is kept of a call and read afterwards: the call log, the supervisor's desk, evals,
and what erasing a session's content decides."""
