"""Ctrl-C for eval and rollouts (bridges/interrupts.py): a SIGINT stops new work and ends the
call in KeyboardInterrupt (exit 130 in the CLI), even where an awaited call swallows the
cancellation that asyncio's own handler relies on."""
import asyncio
import os
import signal

import pytest

from visgym.bridges.interrupts import run_interruptible


def test_a_swallowed_cancellation_still_ends_in_keyboard_interrupt():
    stopped = []

    async def stubborn():
        asyncio.get_running_loop().call_later(0.05, os.kill, os.getpid(), signal.SIGINT)
        for _ in range(200):
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:   # as a library that drops the cancellation would
                continue
            if stopped:                      # the run saw on_stop: it starts nothing new
                return "played to the end"
        return "never stopped"

    with pytest.raises(KeyboardInterrupt):
        run_interruptible(stubborn(), on_stop=lambda: stopped.append(True))
    assert stopped == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_cancelled_run_ends_in_keyboard_interrupt_and_an_undisturbed_one_returns():
    async def waits():
        asyncio.get_running_loop().call_later(0.05, os.kill, os.getpid(), signal.SIGINT)
        await asyncio.sleep(30)

    with pytest.raises(KeyboardInterrupt):
        run_interruptible(waits())

    async def quick():
        await asyncio.sleep(0)
        return 7

    assert run_interruptible(quick()) == 7
