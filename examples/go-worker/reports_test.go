package main

import (
	"testing"
	"time"

	evorav1 "github.com/evora/evora/examples/go-worker/gen/evora/v1"
)

func TestAckResultReadsTheCodeAndFallsBackToAcceptedForOldServers(t *testing.T) {
	cases := []struct {
		ack  *evorav1.ServerAck
		want evorav1.AckResult
	}{
		{&evorav1.ServerAck{Accepted: true, Result: evorav1.AckResult_ACK_RESULT_ACCEPTED}, evorav1.AckResult_ACK_RESULT_ACCEPTED},
		{&evorav1.ServerAck{Result: evorav1.AckResult_ACK_RESULT_LEASE_LOST, Reason: "anything"}, evorav1.AckResult_ACK_RESULT_LEASE_LOST},
		// The text says nothing: a reason that reads like a retry does not make one.
		{&evorav1.ServerAck{Result: evorav1.AckResult_ACK_RESULT_INVALID, Reason: "internal error; retry the write"}, evorav1.AckResult_ACK_RESULT_INVALID},
		{&evorav1.ServerAck{Result: evorav1.AckResult_ACK_RESULT_RETRY_LATER}, evorav1.AckResult_ACK_RESULT_RETRY_LATER},
		// A server that predates result codes: accepted decides.
		{&evorav1.ServerAck{Accepted: true}, evorav1.AckResult_ACK_RESULT_ACCEPTED},
		{&evorav1.ServerAck{Reason: "internal error; retry the write"}, evorav1.AckResult_ACK_RESULT_LEASE_LOST},
	}
	for _, c := range cases {
		if got := ackResult(c.ack); got != c.want {
			t.Errorf("ackResult(%v) = %v, want %v", c.ack, got, c.want)
		}
	}
}

func TestResendDelayDoublesStopsAfterMaxSendsAndNeverOutlivesTheLease(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	farLease := now.Add(time.Hour)
	var delays []time.Duration
	for sends := 1; ; sends++ {
		d, ok := resendDelay(sends, now, farLease)
		if !ok {
			if sends != maxSends {
				t.Fatalf("gave up after %d sends, want %d", sends, maxSends)
			}
			break
		}
		delays = append(delays, d)
	}
	want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond}
	if len(delays) != len(want) {
		t.Fatalf("delays %v, want %v", delays, want)
	}
	for i := range want {
		if delays[i] != want[i] {
			t.Fatalf("delays %v, want %v", delays, want)
		}
	}
	if _, ok := resendDelay(1, now, now.Add(200*time.Millisecond)); ok {
		t.Error("resends although the lease ends when the resend would go out")
	}
	if _, ok := resendDelay(1, now, now.Add(-time.Second)); ok {
		t.Error("resends although the lease has ended")
	}
}
