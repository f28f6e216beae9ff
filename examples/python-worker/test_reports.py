"""Unit tests of what the worker decides from an ack: reports.py's functions, and
Worker.on_ack matching acks to reports by lease token (no stream is opened).

Run: python -m unittest   (in this folder, with the requirements installed)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen"))

from evora.v1 import worker_pb2 as pb  # noqa: E402
from reports import MAX_SENDS, ack_result, acked_report, code_name, resend_delay  # noqa: E402
from worker import Report, Worker  # noqa: E402


class AckResultTest(unittest.TestCase):
    def test_reads_the_code_never_the_text(self) -> None:
        cases = [
            (pb.ServerAck(accepted=True, result=pb.ACK_RESULT_ACCEPTED), pb.ACK_RESULT_ACCEPTED),
            (pb.ServerAck(result=pb.ACK_RESULT_LEASE_LOST, reason="anything"), pb.ACK_RESULT_LEASE_LOST),
            # A reason that reads like a retry does not make one.
            (pb.ServerAck(result=pb.ACK_RESULT_INVALID, reason="internal error; retry the write"), pb.ACK_RESULT_INVALID),
            (pb.ServerAck(result=pb.ACK_RESULT_RETRY_LATER), pb.ACK_RESULT_RETRY_LATER),
        ]
        for ack, want in cases:
            self.assertEqual(ack_result(ack), want, ack)

    def test_an_old_server_without_codes_is_read_from_accepted(self) -> None:
        self.assertEqual(ack_result(pb.ServerAck(accepted=True)), pb.ACK_RESULT_ACCEPTED)
        self.assertEqual(ack_result(pb.ServerAck(reason="internal error; retry the write")), pb.ACK_RESULT_LEASE_LOST)


class ResendDelayTest(unittest.TestCase):
    def test_doubles_and_stops_after_max_sends(self) -> None:
        now, far = 1000.0, 1000.0 + 3600
        delays = []
        sends = 1
        while (d := resend_delay(sends, now, far)) is not None:
            delays.append(d)
            sends += 1
        self.assertEqual(sends, MAX_SENDS)
        self.assertEqual(delays, [0.2, 0.4, 0.8, 1.6])

    def test_never_outlives_the_lease(self) -> None:
        self.assertIsNone(resend_delay(1, 1000.0, 1000.2))
        self.assertIsNone(resend_delay(1, 1000.0, 999.0))
        self.assertEqual(resend_delay(1, 1000.0, 1000.3), 0.2)


class AckedReportTest(unittest.TestCase):
    def test_matches_the_lease_token_the_ack_names(self) -> None:
        self.assertEqual(acked_report(["t1", "t2"], "t2"), 1)
        self.assertEqual(acked_report(["t1", "t2"], "t1"), 0)
        # A token none of the reports carried answers none of them.
        self.assertIsNone(acked_report(["t1", "t2"], "t3"))
        self.assertIsNone(acked_report([], "t1"))

    def test_an_old_server_without_tokens_answers_the_oldest(self) -> None:
        self.assertEqual(acked_report(["t1", "t2"], ""), 0)
        self.assertIsNone(acked_report([], ""))


def report(token: str, kind: str) -> Report:
    """A report of job "j" under a lease token, sent once, its lease far off."""
    req = (pb.WorkRequest(complete=pb.WorkerComplete(job_id="j", lease_token=token)) if kind == "complete"
           else pb.WorkRequest(fail=pb.WorkerFail(job_id="j", lease_token=token)))
    return Report(req, lease_end=time.time() + 3600, tries=1)


class OnAckTest(unittest.TestCase):
    """Worker.on_ack with two reports of one job under two leases (no stream is opened)."""

    def setUp(self) -> None:
        self.worker = Worker(argparse.Namespace(address="127.0.0.1:1", slots=1, max_jobs=0))
        self.addCleanup(self.worker.channel.close)
        self.addCleanup(self.worker.pool.shutdown)
        self.first, self.second = report("t1", "fail"), report("t2", "complete")
        self.worker.pending["j"] = [self.first, self.second]
        # Kept off stderr (and every ack is logged, so the capture is never empty). Not
        # enterContext: the worker runs on Python 3.9.
        capture = self.assertLogs("python-worker", level="DEBUG")
        self.logs = capture.__enter__()
        self.addCleanup(capture.__exit__, None, None, None)

    def ack(self, token: str, result: int) -> None:
        self.worker.on_ack(None, pb.ServerAck(job_id="j", lease_token=token, result=result,  # type: ignore[arg-type]
                                              accepted=result == pb.ACK_RESULT_ACCEPTED))

    def test_acks_in_reverse_order_settle_the_report_of_their_lease(self) -> None:
        # The later report is answered first: RETRY_LATER schedules its resend, not the older one's.
        self.ack("t2", pb.ACK_RESULT_RETRY_LATER)
        self.assertIsNotNone(self.second.resend_at)
        self.assertIsNone(self.first.resend_at)
        self.ack("t2", pb.ACK_RESULT_ACCEPTED)
        self.assertEqual(self.worker.pending["j"], [self.first])
        # An ack naming a lease no report carried settles nothing.
        self.ack("t3", pb.ACK_RESULT_ACCEPTED)
        self.assertEqual(self.worker.pending["j"], [self.first])
        self.assertIn("lease_token=t3", self.logs.output[-1])
        self.ack("t1", pb.ACK_RESULT_LEASE_LOST)
        self.assertEqual(self.worker.pending, {})
        self.assertEqual(self.worker.acked, 2)

    def test_an_ack_without_a_token_settles_the_oldest(self) -> None:
        self.ack("", pb.ACK_RESULT_ACCEPTED)
        self.assertEqual(self.worker.pending["j"], [self.second])
        self.ack("", pb.ACK_RESULT_ACCEPTED)
        self.assertEqual(self.worker.pending, {})


class CodeNameTest(unittest.TestCase):
    def test_names_known_codes_and_numbers_unknown_ones(self) -> None:
        self.assertEqual(code_name(pb.LeaseLostReason, pb.LEASE_LOST_REASON_EXPIRED), "LEASE_LOST_REASON_EXPIRED")
        self.assertEqual(code_name(pb.DrainReason, 99), "99")


if __name__ == "__main__":
    unittest.main()
