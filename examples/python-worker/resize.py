"""The one job type this worker runs: "resize" (the same contract as examples/go-worker).

It computes a thumbnail's size so that its longer side is at most max_side, keeping the
aspect ratio. The arithmetic is integer-only so the Go and Python workers agree.

Payload:
    image               string, required (e.g. "cat.png")
    width, height       positive whole numbers, required
    max_side            positive whole number, default 256
    sleep_ms            pretend the work takes this long (cancellable), default 0
    fail_until_attempt  fail (retryable) every attempt numbered below this, default 0
    fail                "retryable": fail every attempt; "permanent": fail without retry

Result: {image, thumbnail, width, height, attempt, worker}.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

JOB_TYPE = "resize"


class JobError(Exception):
    """A failed attempt. Retryable ones go back to the queue (its backoff decides when
    they run again); the others go straight to the dead-letter queue."""

    def __init__(self, message: str, retryable: bool = True):
        super().__init__(message)
        self.retryable = retryable


class Stopped(Exception):
    """The job was cancelled, its lease was lost, or the worker is shutting down."""


@dataclass
class JobInfo:
    id: str
    attempt: int
    payload: dict[str, Any]
    worker_id: str
    stop: threading.Event  # set when the handler should give up
    stop_reason: list[str]  # why (set before `stop`)


def _whole(v: Any) -> int | None:
    """v as an int if it is a JSON number without a fractional part."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not float(v).is_integer():
        return None
    return int(v)


def resize(job: JobInfo) -> dict[str, Any]:
    p = job.payload
    fail = p.get("fail", "")
    if fail == "retryable":
        raise JobError(f"asked to fail (attempt {job.attempt})")
    if fail == "permanent":
        raise JobError("asked to fail permanently", retryable=False)
    if fail != "":
        raise JobError('bad payload: fail must be "retryable" or "permanent"', retryable=False)
    n = _whole(p.get("fail_until_attempt"))
    if n is not None and job.attempt < n:
        raise JobError(f"simulated failure on attempt {job.attempt} (fail_until_attempt={n})")

    image = p.get("image")
    if not isinstance(image, str) or image == "":
        raise JobError("bad payload: image must be a non-empty string", retryable=False)
    w, h = _whole(p.get("width")), _whole(p.get("height"))
    if w is None or h is None or w <= 0 or h <= 0:
        raise JobError("bad payload: width and height must be positive whole numbers", retryable=False)
    max_side = 256
    if "max_side" in p:
        m = _whole(p["max_side"])
        if m is None or m <= 0:
            raise JobError("bad payload: max_side must be a positive whole number", retryable=False)
        max_side = m

    ms = _whole(p.get("sleep_ms"))
    if ms and ms > 0 and job.stop.wait(ms / 1000):
        raise Stopped(job.stop_reason[0] if job.stop_reason else "stopped")

    tw, th = w, h
    longest = max(w, h)
    if longest > max_side:
        # round(x * max_side / longest), half up, in integers
        tw = (2 * w * max_side + longest) // (2 * longest)
        th = (2 * h * max_side + longest) // (2 * longest)
    stem, ext = os.path.splitext(image)
    return {
        "image": image,
        "thumbnail": f"{stem}_{tw}x{th}{ext}",
        "width": tw,
        "height": th,
        "attempt": job.attempt,
        "worker": job.worker_id,
    }
