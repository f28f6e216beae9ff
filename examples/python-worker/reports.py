"""What the worker decides from the server's codes, and which report an ack answers, as
plain functions (tested in test_reports.py). The worker acts on these codes, never on the
text that comes with them."""

from __future__ import annotations

import time
from typing import Any, Optional, Sequence

from evora.v1 import worker_pb2 as pb

# Resending a report the server could not apply now (ACK_RESULT_RETRY_LATER): at most
# MAX_SENDS sends in all, the first resend after FIRST_RESEND seconds, doubling, and never
# past the job's lease. When the ack says database_unavailable (the server cannot reach its
# database), the resends double from FIRST_RESEND up to MAX_OUTAGE_RESEND seconds apart and
# go on for as long as the outage lasts, past the lease end last heard: the server holds the
# lease while the heartbeats name it, and giving up would only make a finished job run again.
MAX_SENDS = 5
FIRST_RESEND = 0.2
MAX_OUTAGE_RESEND = 2.0

# gRPC's default largest received message: what a server takes when its welcome does not
# say (ServerWelcome.max_message_bytes unset, an older server).
DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
# The longest error the server stores with a failure; the worker cuts a longer one too, so
# that a fail always fits in a message.
MAX_ERROR_CHARS = 10_000


def ack_result(ack: pb.ServerAck) -> int:
    """What an ack says became of a report (a pb.AckResult value). A server that predates
    result codes leaves it unset, and then `accepted` decides: true is ACCEPTED, false is
    LEASE_LOST."""
    if ack.result != pb.ACK_RESULT_UNSPECIFIED:
        return ack.result
    return pb.ACK_RESULT_ACCEPTED if ack.accepted else pb.ACK_RESULT_LEASE_LOST


def resend_delay(sends: int, now: float, lease_end: float) -> Optional[float]:
    """Seconds to wait before sending a report again after ACK_RESULT_RETRY_LATER, given how
    many times it was sent; None means give up: it was sent MAX_SENDS times, or the lease
    would end first (the server then requeues the job). `now` and `lease_end` are seconds of
    this worker's monotonic clock (Task.lease_end), so a clock that differs from the server's
    changes nothing."""
    if sends >= MAX_SENDS:
        return None
    delay = FIRST_RESEND * 2 ** max(0, sends - 1)
    if now + delay >= lease_end:
        return None
    return delay


def outage_resend_delay(resends: int) -> float:
    """Seconds to wait before sending a report again after ACK_RESULT_RETRY_LATER with
    database_unavailable, given how many such resends it had. There is no giving up: the
    outage ends, or a lease_lost drops the report."""
    # Four doublings already pass the cap; the power stays small whatever the count.
    return min(MAX_OUTAGE_RESEND, FIRST_RESEND * 2 ** min(resends, 4))


def acked_report(tokens: Sequence[str], ack_token: str) -> Optional[int]:
    """Which of a job's unacknowledged reports an ack answers, given their lease tokens
    oldest first: the one under the lease token the ack names, or None if none is. An ack
    without a token comes from a server that predates ServerAck.lease_token, which acks one
    job's reports in the order they were sent: it answers the oldest."""
    if not tokens:
        return None
    if ack_token == "":
        return 0
    return report_under(tokens, ack_token)


def report_under(tokens: Sequence[str], lease_token: str) -> Optional[int]:
    """Which of a job's unacknowledged reports, given their lease tokens, was made under a
    lease; None if none was."""
    for i, token in enumerate(tokens):
        if token == lease_token:
            return i
    return None


def code_name(enum: Any, value: int) -> str:
    """The name of a proto enum value for logs; the number if this worker does not know it."""
    try:
        return enum.Name(value)
    except ValueError:
        return str(value)


def epoch(ts: Any) -> float:
    """A google.protobuf.Timestamp as epoch seconds."""
    return ts.seconds + ts.nanos / 1e9


def lease_length(leased: Any) -> float:
    """A pushed job's lease in seconds: lease_expires_at - started_at, both the server's
    clock, so that this worker's own clock, which may differ from the server's, only measures
    the lease from when it came. From a server that does not send started_at: the time left
    by this worker's clock."""
    end = epoch(leased.lease_expires_at)
    return end - (epoch(leased.job.started_at) if leased.job.HasField("started_at") else time.time())


def token_of(req: pb.WorkRequest) -> str:
    """The lease a complete or fail report is about."""
    return req.complete.lease_token if req.WhichOneof("msg") == "complete" else req.fail.lease_token


def report_too_large(req: pb.WorkRequest, max_message: int) -> Optional[str]:
    """Why req is more than the server receives (ServerWelcome.max_message_bytes), or None
    when it fits. Written, such a message would end the whole stream with RESOURCE_EXHAUSTED,
    and again on every stream it were resent on (docs/api.md, "Size limits on the Work
    stream"): the worker fails the job with this reason instead."""
    size = req.ByteSize()
    if size > max_message:
        return f"complete refused: the report is {size} bytes; the server takes messages of at most {max_message}"
    return None


def cut_error(error: str) -> str:
    """error cut to MAX_ERROR_CHARS characters (what the server stores)."""
    return error[:MAX_ERROR_CHARS]


def fail_instead(req: pb.WorkRequest, reason: str) -> pb.WorkRequest:
    """The report sent once in place of `req`, which the server refused as invalid (it
    changed nothing and the lease runs on: docs/api.md, "What each ack result asks of the
    worker"): a non-retryable fail under the same lease whose error names the refused report
    and the server's reason. The job then ends at once in the DLQ with a readable error,
    instead of running again when its lease expires and ending as "lease expired"."""
    what = req.WhichOneof("msg")
    old = req.complete if what == "complete" else req.fail
    return pb.WorkRequest(fail=pb.WorkerFail(job_id=old.job_id, lease_token=old.lease_token,
                                             error=cut_error(f"{what} refused: {reason}"), non_retryable=True))
