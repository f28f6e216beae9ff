package main

import (
	"context"
	"errors"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	evorav1 "github.com/evora/evora/examples/go-worker/gen/evora/v1"
)

// jobInfo is what a handler sees of a leased job.
type jobInfo struct {
	id       string
	attempt  int32
	payload  *structpb.Struct
	workerID string
}

// task is a job the worker is running.
type task struct {
	id, token string
	// leaseEnd is, by this worker's clock, a time before which the lease surely still lasts:
	// when its push came (or the heartbeat that last extended it was sent) plus leaseLen.
	// Never the server's lease_expires_at itself: the two clocks may differ.
	leaseEnd time.Time
	leaseLen time.Duration // the lease's length (leaseLength)
	cancel   context.CancelCauseFunc
	lost     bool // the server took the lease away: never report this job
}

// outcome is a finished handler.
type outcome struct {
	t      *task
	result map[string]any
	err    error
}

// start runs a leased job in its own goroutine.
func (w *worker) start(s *session, lj *evorav1.LeasedJob) {
	j := lj.GetJob()
	ctx, cancel := context.WithCancelCause(context.Background())
	lease := leaseLength(lj)
	t := &task{id: j.GetId(), token: lj.GetLeaseToken(), leaseEnd: time.Now().Add(lease), leaseLen: lease, cancel: cancel}
	if old, ok := w.running[t.id]; ok && old.token != t.token && !old.lost {
		// The job was leased again, so its older lease is gone (its lease_lost may come
		// later, or never): stop that run and report nothing for it.
		w.log.Warn("job leased again; stopping the run of its older lease without a report", "job_id", t.id)
		old.lost = true
		old.cancel(errLeaseLost)
	}
	w.running[t.id] = t
	s.beatFor(lj)
	w.log.Info("job received", "job_id", t.id, "type", j.GetType(), "attempt", j.GetAttempt())
	info := jobInfo{id: t.id, attempt: j.GetAttempt(), payload: j.GetPayload(), workerID: w.cfg.workerID}
	jobType := j.GetType()
	go func() {
		defer func() {
			if p := recover(); p != nil {
				w.done <- outcome{t: t, err: retryable("handler panicked: %v", p)}
			}
		}()
		if jobType != JobType {
			w.done <- outcome{t: t, err: permanent("this worker runs only %q jobs, not %q", JobType, jobType)}
			return
		}
		res, err := resize(ctx, info)
		w.done <- outcome{t: t, result: res, err: err}
	}()
}

// finish turns a handler's outcome into a complete or fail report.
func (w *worker) finish(s *session, o outcome) {
	t := o.t
	if w.running[t.id] == t { // not a later lease of the same job, pushed after this one was lost
		delete(w.running, t.id)
	}
	t.cancel(nil)
	defer w.markIdle()
	if t.lost {
		return
	}
	var req *evorav1.WorkRequest
	if o.err == nil {
		result, err := structpb.NewStruct(o.result)
		if err != nil {
			o.err = permanent("result is not JSON: %v", err)
		} else {
			req = &evorav1.WorkRequest{Msg: &evorav1.WorkRequest_Complete{Complete: &evorav1.WorkerComplete{
				JobId: t.id, LeaseToken: t.token, Result: result,
			}}}
			if err := reportTooLarge(req, s.maxMessage); err != nil {
				o.err, req = err, nil
			} else {
				w.log.Info("job done", "job_id", t.id)
			}
		}
	}
	if o.err != nil {
		var je *jobError
		nonRetryable := errors.As(o.err, &je) && !je.retryable
		req = &evorav1.WorkRequest{Msg: &evorav1.WorkRequest_Fail{Fail: &evorav1.WorkerFail{
			JobId: t.id, LeaseToken: t.token, Error: cutError(o.err.Error()), NonRetryable: nonRetryable,
		}}}
		w.log.Info("job failed", "job_id", t.id, "err", o.err, "retryable", !nonRetryable)
	}
	r := &report{req: req, leaseEnd: t.leaseEnd, leaseLen: t.leaseLen}
	w.pending[t.id] = append(w.pending[t.id], r)
	w.send(s, r)
}

// leaseToken is the lease a complete or fail report is about.
func leaseToken(req *evorav1.WorkRequest) string {
	if c := req.GetComplete(); c != nil {
		return c.GetLeaseToken()
	}
	return req.GetFail().GetLeaseToken()
}

// defaultMaxMessageBytes is gRPC's default largest received message: what a server takes
// when its welcome does not say (an older server).
const defaultMaxMessageBytes = 4 << 20

// maxErrorChars is the longest error the server stores with a failure; the worker cuts a
// longer one too, so that a fail always fits in a message.
const maxErrorChars = 10000

// reportTooLarge is the error to fail a job with instead of sending req, when req is more
// than the server receives (ServerWelcome.max_message_bytes): written, it would end the
// whole stream with RESOURCE_EXHAUSTED, and again on every stream it were resent on
// (docs/api.md, "Size limits on the Work stream"). Nil when it fits.
func reportTooLarge(req *evorav1.WorkRequest, maxMessage int) error {
	if n := proto.Size(req); n > maxMessage {
		return permanent("complete refused: the report is %d bytes; the server takes messages of at most %d", n, maxMessage)
	}
	return nil
}

// cutError is err cut to maxErrorChars characters.
func cutError(err string) string {
	if len(err) <= maxErrorChars {
		return err
	}
	if r := []rune(err); len(r) > maxErrorChars {
		return string(r[:maxErrorChars])
	}
	return err
}
