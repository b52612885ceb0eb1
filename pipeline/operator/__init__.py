"""Who speaks to the caller: the line (the app holds it, or a person takes it), what the
app has the agent say (`agent`), and what the model is given (`prompt`)."""
