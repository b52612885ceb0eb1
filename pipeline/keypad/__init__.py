"""What the caller's keypad does in a call: a key pressed (`presses`: ask for a person, end,
opt out, decline recording) and digits captured for a tool that nobody hears (`capture`)."""
