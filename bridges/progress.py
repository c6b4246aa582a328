"""A run's progress line on stderr, redrawn in place at most twice a second.

One counter set for every workflow: episodes done of the total, and whatever the workflow
counts besides (successes, requests and failed requests for runs that talk to an endpoint,
images for demonstrations). The line shows the counters that are in use: an evaluation shows its
success rate, requests per second, errors and the latest server error; demonstrations show
episodes and images per second and the time left.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from .faults import shorten


@dataclass
class Progress:
    total: int
    done: int = 0
    successes: int = 0
    requests: int = 0
    errors: int = 0
    images: int = 0
    spoiled: int = 0                      # episodes the server spoiled (redone by --resume)
    last_error: str | None = None         # the server's text of the latest failed request
    enabled: bool = True
    style: str = "eval"                   # "eval" or "demos" (which counters the line shows)
    started: float = field(default_factory=time.perf_counter)
    stream: object = None                 # default: sys.stderr at the time of writing
    _last: float = 0.0
    _width: int = 0

    def line(self, now: float | None = None) -> str:
        elapsed = max((now or time.perf_counter()) - self.started, 1e-9)
        if self.style == "demos":
            rate = self.done / elapsed
            eta = (self.total - self.done) / rate if rate > 0 else float("nan")
            return (f"  episodes {self.done}/{self.total}  {rate:7.1f} episodes/s  "
                    f"{self.images / elapsed:8.1f} images/s  ETA {eta:5.0f}s ")
        rate = self.successes / self.done * 100 if self.done else 0.0
        line = (f"  episodes {self.done}/{self.total}  success {rate:5.1f}%  "
                f"requests/s {self.requests / elapsed:6.1f}  errors {self.errors}  "
                f"{elapsed:6.0f}s")
        if self.spoiled:
            line += f"  spoiled by the server {self.spoiled}"
        if self.last_error:
            line += f"  last error: {shorten(self.last_error, 70)}"
        return line

    def show(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self._last < 0.5:
            return
        self._last = now
        line = self.line(now)
        stream = self.stream or sys.stderr
        # Pad over what a longer previous line left on the terminal.
        stream.write("\r" + line.ljust(self._width))
        self._width = len(line)
        stream.flush()
        if force:
            stream.write("\n")

    def close(self) -> None:
        """Draw the final line and end it."""
        self.show(force=True)
