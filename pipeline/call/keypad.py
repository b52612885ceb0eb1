"""Keypad capture's vocabulary: what a collection asks for, the entry a call holds while the
caller types, and the built-in tool with which the model starts one (PCI DSS's preferred way to
take a card: the digits are keyed, never said, and no person or model ever hears them).

The rules are `pipeline.keypad.capture`'s; the capture itself is the gateway's boundary
(`pipeline.privacy.boundary`), which keeps the presses in memory and hands the workers one
sealed event with their count. This module imports no rule, so a wing may name it.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

COLLECT_DIGITS = "collect_digits"
# The event the boundary submits when the caller has finished typing.
DIGITS_COLLECTED = "switchboard.digits_collected"

# A card has at most 19 digits; a longer entry is no use to anybody and is cut there.
MAXIMUM_DIGITS = 32
DEFAULT_TIMEOUT_S = 60.0
MAXIMUM_TIMEOUT_S = 300.0
MAXIMUM_PROMPT_CHARS = 1_000

EndKey = Literal["#", "*"]
EndedBy = Literal["end", "max"]


class DigitsSpec(BaseModel):
    """How many digits the caller types, and the key that ends the entry (None: it ends at
    `max`, so `min` must equal it). The default is a card's: 12 to 19, ended by #."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min: int = Field(default=12, ge=1, le=MAXIMUM_DIGITS)
    max: int = Field(default=19, ge=1, le=MAXIMUM_DIGITS)
    end: EndKey | None = "#"

    @model_validator(mode="after")
    def _consistent(self) -> DigitsSpec:
        if self.min > self.max:
            raise ValueError(f"digits.min ({self.min}) is more than digits.max ({self.max})")
        if self.end is None and self.min != self.max:
            raise ValueError("without an end key the entry ends at digits.max, so digits.min must equal it")
        return self


class KeypadEntry(BaseModel):
    """The collection a call is in: the caller types (`typing`), then the tool runs with what
    they typed (`running`). One at a time; numbered within the session."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    number: int
    tool: str
    # The tool's sensitive parameter the digits fill (sealed), and its other arguments.
    parameter: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    digits: DigitsSpec = DigitsSpec()
    timeout_s: float = DEFAULT_TIMEOUT_S
    by: Literal["app", "model"] = "app"
    phase: Literal["typing", "running"] = "typing"
    count: int = 0

    @property
    def call_id(self) -> str:
        """The id of the tool step the collected digits run as."""
        return keypad_call_id(self.number)


class KeypadAsk(BaseModel):
    """A collection the model asked for with its built-in tool, handed from the wing that heard
    the function call to the rules that start it (within the same step)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    call_id: str
    tool: str
    prompt: str = Field(min_length=1, max_length=MAXIMUM_PROMPT_CHARS)
    parameter: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    digits: DigitsSpec = DigitsSpec()


def keypad_call_id(number: int) -> str:
    return f"keypad_{number}"


def collectable(tool_sensitive: dict[str, tuple[str, ...]]) -> list[str]:
    """The tools a collection can fill: those with a sensitive parameter, in name order."""
    return sorted(name for name, parameters in tool_sensitive.items() if parameters)


def parameter_for(
    tool_sensitive: dict[str, tuple[str, ...]], tool: str, parameter: str | None
) -> tuple[str | None, str]:
    """The sensitive parameter of `tool` the digits fill, or (None, why not)."""
    sensitive = tool_sensitive.get(tool, ())
    if not sensitive:
        return None, f"{tool} has no sensitive parameter for the digits (declare one with sensitive=...)"
    if parameter is not None:
        if parameter not in sensitive:
            return None, f"{parameter} is not one of {tool}'s sensitive parameters ({', '.join(sensitive)})"
        return parameter, ""
    if len(sensitive) > 1:
        return (
            None,
            f"{tool} has several sensitive parameters ({', '.join(sensitive)}); name one as parameter",
        )
    return sensitive[0], ""


def tool_refusal(
    ask: KeypadAsk, tool_versions: dict[str, str], tool_sensitive: dict[str, tuple[str, ...]]
) -> tuple[str, str] | None:
    """Why the session's tools cannot take this collection: (code, message), or None."""
    if ask.tool not in tool_versions:
        return "unknown_tool", f"this session has no tool called {ask.tool}"
    parameter, why = parameter_for(tool_sensitive, ask.tool, ask.parameter)
    if parameter is None:
        return "tool_cannot_collect", why
    if parameter in ask.arguments:
        return "digits_in_arguments", f"{parameter} is what the caller types; it cannot be given in arguments"
    return None


def ask_of_call(call_id: str, arguments: str) -> KeypadAsk | str:
    """The collection the model's `collect_digits` call asks for, or why it cannot be read."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return "the arguments are not JSON"
    if not isinstance(parsed, dict):
        return "the arguments must be an object"
    try:
        return KeypadAsk.model_validate({**parsed, "call_id": call_id})
    except ValueError as error:
        return str(error).splitlines()[0][:300]


def collect_digits_tool(tool_sensitive: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    """The built-in tool with which the model has the caller key a number in (a card) for one
    of the session's tools. Only tools with a sensitive parameter are offered (an enum)."""
    return {
        "type": "function",
        "name": COLLECT_DIGITS,
        "description": (
            "Have the caller type a number (a card number) on their phone's keypad, for a tool that "
            "needs it. The caller hears the prompt; you hear nothing until they finish, and you are "
            "then told the tool's outcome, never the digits. Never ask the caller to say the number."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "tool": {"type": "string", "enum": collectable(tool_sensitive)},
                "prompt": {
                    "type": "string",
                    "description": (
                        "What the caller is told, e.g. 'Please type your card number, then the hash key.'"
                    ),
                },
                "arguments": {
                    "type": "object",
                    "description": "The tool's other arguments (not the number itself).",
                },
            },
            "required": ["tool", "prompt"],
        },
    }
