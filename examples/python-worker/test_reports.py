"""Unit tests of reports.py: what the worker decides from an ack's code.

Run: python -m unittest   (in this folder, with the requirements installed)
"""

from __future__ import annotations

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen"))

from evora.v1 import worker_pb2 as pb  # noqa: E402
from reports import MAX_SENDS, ack_result, code_name, resend_delay  # noqa: E402


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


class CodeNameTest(unittest.TestCase):
    def test_names_known_codes_and_numbers_unknown_ones(self) -> None:
        self.assertEqual(code_name(pb.LeaseLostReason, pb.LEASE_LOST_REASON_EXPIRED), "LEASE_LOST_REASON_EXPIRED")
        self.assertEqual(code_name(pb.DrainReason, 99), "99")


if __name__ == "__main__":
    unittest.main()
