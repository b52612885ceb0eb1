"""Run the simulated provider: `python -m simulator --http-port 8710 --ws-port 8711`.

Prints `simulator ready http=… ws=…` once listening; SIGTERM or SIGINT stops it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from pathlib import Path

from simulator.live_dial import RINGING_LIMIT_MS
from simulator.live_script import LiveScript, LiveTiming, load_live_script
from simulator.playback import GATE_TIMEOUT_S
from simulator.script import CallScript, Timing, load_script
from simulator.server import Simulator


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m simulator", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--http-port", type=int, default=8710)
    parser.add_argument("--ws-port", type=int, default=8711)
    parser.add_argument("--script", help="call script: a JSON file, or a packaged name such as three_turn")
    parser.add_argument("--live-script", help="Live call script: a JSON file, or a packaged name")
    parser.add_argument("--recording", type=Path, help="replay this JSONL recording on every call")
    parser.add_argument("--speed", type=float, default=1.0, help="playback speed (0 = as fast as possible)")
    parser.add_argument(
        "--open-loop",
        action="store_true",
        help="play the recording on its clock whatever the host sends (default: closed loop)",
    )
    parser.add_argument(
        "--gate-timeout",
        type=float,
        default=GATE_TIMEOUT_S,
        help="closed loop: seconds to wait for a host control before the playback fails",
    )
    parser.add_argument("--lenient", action="store_true", help="do not check sent events")
    parser.add_argument(
        "--dial-plan", type=Path, help="Live outbound calls: what happens at each number (a JSON file)"
    )
    parser.add_argument(
        "--outbound-disabled",
        action="store_true",
        help="the organization may not place outbound Live calls (403 outbound_sip_not_enabled)",
    )
    parser.add_argument(
        "--first-audio-ms",
        type=int,
        help=(
            "how long the model thinks before each answer's first audio, for the scripts given here "
            "(Realtime and Live; a script PUT later says its own): a real model takes 300-800 ms"
        ),
    )
    parser.add_argument(
        "--ringing-limit-ms",
        type=int,
        default=RINGING_LIMIT_MS,
        help=f"an outbound call still ringing this long fails no_answer (default {RINGING_LIMIT_MS})",
    )
    return parser.parse_args(argv)


def _scripts(arguments: argparse.Namespace) -> tuple[CallScript | str | None, LiveScript | str | None]:
    """The scripts named on the command line, with the first-audio delay it gives, if any."""
    delay_ms = arguments.first_audio_ms
    if delay_ms is None:
        return arguments.script, arguments.live_script
    script = load_script(arguments.script) if arguments.script else CallScript()
    live_script = load_live_script(arguments.live_script) if arguments.live_script else LiveScript()
    # Validated as a script's own field is (a negative delay is refused here too).
    timing = Timing.model_validate({**script.timing.model_dump(), "first_audio_ms": delay_ms})
    live_timing = LiveTiming.model_validate({**live_script.timing.model_dump(), "first_audio_ms": delay_ms})
    return (
        script.model_copy(update={"timing": timing}),
        live_script.model_copy(update={"timing": live_timing}),
    )


async def _serve(arguments: argparse.Namespace) -> None:
    script, live_script = _scripts(arguments)
    simulator = Simulator(
        script,
        recording=arguments.recording,
        speed=arguments.speed,
        strict=not arguments.lenient,
        closed_loop=not arguments.open_loop,
        gate_timeout_s=arguments.gate_timeout,
        live_script=live_script,
        dial_plan=arguments.dial_plan,
        outbound_enabled=not arguments.outbound_disabled,
        ringing_limit_ms=arguments.ringing_limit_ms,
    )
    await simulator.start(arguments.host, arguments.http_port, arguments.ws_port)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    print(f"simulator ready http={simulator.http_url} ws={simulator.ws_url}", flush=True)
    await stopping.wait()
    await simulator.stop()


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and serve until a signal arrives."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    asyncio.run(_serve(_arguments(argv)))


if __name__ == "__main__":
    main()
