"""Ctrl-C for the long-running commands (``visgym eval`` and ``visgym rollouts``).

``run_interruptible(coro, on_stop)`` is ``asyncio.run(coro)`` with a SIGINT that is never
lost. asyncio's own handler only cancels the main task, and a cancellation that some awaited
call swallows lets the run play on to its end and exit 0 as if nobody had asked it to stop
(Python 3.11's ``asyncio.wait_for`` is one such call). Here the first SIGINT calls
``on_stop()`` (the run then starts no new work), cancels the task, and makes this call raise
KeyboardInterrupt once the coroutine has ended, however it ended; the commands turn that into
exit code 130 with the records kept. A second SIGINT raises KeyboardInterrupt at once.
"""
from __future__ import annotations

import asyncio
import signal
import threading

__all__ = ["run_interruptible"]


def run_interruptible(coro, on_stop=None):
    interrupted = []

    async def main():
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()

        def on_sigint():
            if interrupted:
                raise KeyboardInterrupt
            interrupted.append(True)
            if on_stop is not None:
                on_stop()
            task.cancel()

        installed = False
        if threading.current_thread() is threading.main_thread():
            try:
                loop.add_signal_handler(signal.SIGINT, on_sigint)
                installed = True
            except (NotImplementedError, RuntimeError, ValueError):  # no signals here
                installed = False
        try:
            return await coro
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGINT)

    try:
        result = asyncio.run(main())
    except asyncio.CancelledError:
        if interrupted:
            raise KeyboardInterrupt from None
        raise
    if interrupted:
        raise KeyboardInterrupt
    return result
