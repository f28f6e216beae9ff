// Command go-worker is an Evora worker written against the generated gRPC stubs only.
//
// It opens a WorkerService.Work stream, says hello (worker id, queue, slots), runs the
// jobs the server pushes (type "resize", see resize.go) up to -slots at a time, sends a
// heartbeat for the leases it holds every heartbeat_interval_seconds the server gave in
// its welcome, reports each job with complete or fail, and waits for the server's ack.
// When the stream breaks it reconnects with backoff and finishes the jobs it holds with
// their lease tokens. SIGTERM or SIGINT drains: no new jobs, finish the running ones,
// then exit 0 (a second signal exits at once).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	evorav1 "github.com/evora/evora/examples/go-worker/gen/evora/v1"
)

type config struct {
	address      string
	queue        string
	workerID     string
	slots        int
	maxJobs      int
	idleExit     time.Duration
	drainTimeout time.Duration
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

func parseFlags() config {
	host, _ := os.Hostname()
	var c config
	flag.StringVar(&c.address, "address", env("EVORA_ADDRESS", "127.0.0.1:50051"), "Evora server host:port (env EVORA_ADDRESS)")
	flag.StringVar(&c.queue, "queue", env("EVORA_QUEUE", "images"), "queue to take jobs from (env EVORA_QUEUE)")
	flag.StringVar(&c.workerID, "worker-id", env("EVORA_WORKER_ID", fmt.Sprintf("go-%s-%d", host, os.Getpid())), "worker id recorded on jobs (env EVORA_WORKER_ID)")
	flag.IntVar(&c.slots, "slots", envInt("EVORA_SLOTS", 4), "jobs run at once (env EVORA_SLOTS)")
	flag.IntVar(&c.maxJobs, "max-jobs", 0, "drain and exit after this many reports (complete or fail) were acknowledged; 0 = never")
	flag.DurationVar(&c.idleExit, "idle-exit", 0, "drain and exit after this long with no job; 0 = never")
	flag.DurationVar(&c.drainTimeout, "drain-timeout", 30*time.Second, "on drain, how long to wait for running jobs before exiting anyway")
	flag.Parse()
	if c.slots < 1 {
		fmt.Fprintln(os.Stderr, "go-worker: -slots must be at least 1")
		os.Exit(2)
	}
	return c
}

func main() {
	cfg := parseFlags()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("worker_id", cfg.workerID)
	conn, err := grpc.NewClient(cfg.address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Error("cannot create client", "err", err)
		os.Exit(1)
	}
	defer conn.Close()

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	w := newWorker(cfg, evorav1.NewWorkerServiceClient(conn), log)
	os.Exit(w.run(sigs))
}

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
	cancel    context.CancelCauseFunc
	lost      bool // the server took the lease away: never report this job
}

// outcome is a finished handler.
type outcome struct {
	t      *task
	result map[string]any
	err    error
}

// report is a complete or fail message waiting for its ack.
type report struct {
	req   *evorav1.WorkRequest
	tries int
}

// session is one Work stream.
type session struct {
	stream   evorav1.WorkerService_WorkClient
	cancel   context.CancelFunc
	msgs     chan *evorav1.WorkResponse // closed when the stream ends
	err      error                      // why it ended (read after msgs is closed)
	fenced   bool                       // a heartbeat ack arrived after our drain: no more jobs will come
	fenceSet bool                       // we sent drain + a fencing heartbeat on this stream
}

var (
	errCancelled = errors.New("cancelled by an operator")
	errLeaseLost = errors.New("lease lost")
	errShutdown  = errors.New("worker shutting down")
)

type worker struct {
	cfg     config
	client  evorav1.WorkerServiceClient
	log     *slog.Logger
	running map[string]*task   // by job id
	pending map[string]*report // reports sent (or to send) and not yet acknowledged, by job id
	done    chan outcome
	acked   int // reports acknowledged
	stop    bool
	stopAt  time.Time
	idle    time.Time // since when nothing was running or waiting
}

func newWorker(cfg config, client evorav1.WorkerServiceClient, log *slog.Logger) *worker {
	return &worker{
		cfg: cfg, client: client, log: log,
		running: map[string]*task{}, pending: map[string]*report{},
		done: make(chan outcome, cfg.slots), idle: time.Now(),
	}
}

// run is the worker's single event loop: it owns all state, and it alone sends on the
// stream. It returns the exit code.
func (w *worker) run(sigs <-chan os.Signal) int {
	backoff := 250 * time.Millisecond
	for {
		s, hbEvery, err := w.connect()
		if err != nil {
			if w.stop && time.Now().After(w.stopAt.Add(w.cfg.drainTimeout)) {
				w.log.Error("giving up: cannot reach the server while draining", "err", err, "held", len(w.running)+len(w.pending))
				return 1
			}
			// Full jitter, capped at 10 s.
			wait := time.Duration(rand.Int64N(int64(backoff))) + 50*time.Millisecond
			w.log.Warn("cannot open a Work session; retrying", "err", err, "in", wait.Round(time.Millisecond))
			if code, exit := w.sleep(wait, sigs); exit {
				return code
			}
			backoff = min(backoff*2, 10*time.Second)
			continue
		}
		backoff = 250 * time.Millisecond
		code, exit := w.serve(s, hbEvery, sigs)
		s.cancel()
		if exit {
			return code
		}
	}
}

// connect opens a Work stream, says hello with the leases still held from an earlier
// stream, waits for the welcome, and resends the unacknowledged reports.
func (w *worker) connect() (*session, time.Duration, error) {
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := w.client.Work(ctx)
	if err != nil {
		cancel()
		return nil, 0, err
	}
	hello := &evorav1.WorkerHello{WorkerId: w.cfg.workerID, Queues: []string{w.cfg.queue}, Slots: int32(w.cfg.slots)}
	for _, t := range w.running {
		if !t.lost {
			hello.Held = append(hello.Held, &evorav1.Lease{JobId: t.id, LeaseToken: t.token})
		}
	}
	for id, r := range w.pending {
		hello.Held = append(hello.Held, &evorav1.Lease{JobId: id, LeaseToken: leaseToken(r.req)})
	}
	if err := stream.Send(&evorav1.WorkRequest{Msg: &evorav1.WorkRequest_Hello{Hello: hello}}); err != nil {
		cancel()
		return nil, 0, err
	}
	first, err := stream.Recv()
	if err != nil {
		cancel()
		return nil, 0, err
	}
	welcome := first.GetWelcome()
	if welcome == nil {
		cancel()
		return nil, 0, fmt.Errorf("expected welcome, got %T", first.GetMsg())
	}
	hbEvery := time.Duration(max(1, welcome.GetHeartbeatIntervalSeconds())) * time.Second
	w.log.Info("session opened", "session_id", welcome.GetSessionId(), "queue", w.cfg.queue, "slots", w.cfg.slots,
		"lease_seconds", welcome.GetLeaseSeconds(), "heartbeat_every", hbEvery, "held", len(hello.Held))

	s := &session{stream: stream, cancel: cancel, msgs: make(chan *evorav1.WorkResponse, 16)}
	go func() {
		defer close(s.msgs)
		for {
			m, err := stream.Recv()
			if err != nil {
				s.err = err
				return
			}
			select {
			case s.msgs <- m:
			case <-ctx.Done():
				s.err = ctx.Err()
				return
			}
		}
	}()
	for _, r := range w.pending {
		r.tries++
		_ = stream.Send(r.req) // a failed send shows up as the stream ending
	}
	return s, hbEvery, nil
}

// serve handles one session until it ends. exit says whether the worker is done.
func (w *worker) serve(s *session, hbEvery time.Duration, sigs <-chan os.Signal) (code int, exit bool) {
	hb := time.NewTicker(hbEvery)
	defer hb.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	if w.stop {
		w.fence(s)
	}
	for {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				if w.stop && w.finished() {
					return 0, true
				}
				if errors.Is(s.err, io.EOF) {
					w.log.Warn("server closed the stream; reconnecting", "held", len(w.running)+len(w.pending))
				} else {
					w.log.Warn("stream broke; reconnecting", "err", s.err, "held", len(w.running)+len(w.pending))
				}
				return 0, false
			}
			w.handle(s, m)
		case o := <-w.done:
			w.finish(s, o)
		case <-hb.C:
			w.heartbeat(s)
		case sig := <-sigs:
			if w.stop {
				w.log.Warn("second signal: exiting now", "signal", sig, "abandoned", len(w.running)+len(w.pending))
				return 1, true
			}
			w.log.Info("draining", "signal", sig, "running", len(w.running))
			w.beginStop(s)
		case <-tick.C:
		}

		if !w.stop && w.cfg.idleExit > 0 && len(w.running) == 0 && len(w.pending) == 0 && time.Since(w.idle) >= w.cfg.idleExit {
			w.log.Info("idle; draining", "idle_for", w.cfg.idleExit)
			w.beginStop(s)
		}
		if w.stop {
			if s.fenced && w.finished() {
				// Nothing held and nothing more will be pushed: close our side and let the
				// server end the stream.
				_ = s.stream.CloseSend()
				w.waitEnd(s)
				w.log.Info("drained; exiting", "reports_acked", w.acked)
				return 0, true
			}
			if time.Now().After(w.stopAt.Add(w.cfg.drainTimeout)) {
				for _, t := range w.running {
					t.cancel(errShutdown)
				}
				w.log.Error("drain timed out; exiting with jobs held (their leases will expire and they will be retried)",
					"running", len(w.running), "unacked", len(w.pending))
				return 1, true
			}
		}
	}
}

func (w *worker) finished() bool { return len(w.running) == 0 && len(w.pending) == 0 }

// beginStop asks the server for no new jobs; the worker exits once it holds nothing.
func (w *worker) beginStop(s *session) {
	w.stop = true
	w.stopAt = time.Now()
	w.fence(s)
}

// fence sends drain, then a heartbeat: the server handles a stream's messages in order, so
// once the heartbeat is acknowledged every job pushed before the drain has arrived.
func (w *worker) fence(s *session) {
	if s.fenceSet {
		return
	}
	s.fenceSet = true
	_ = s.stream.Send(&evorav1.WorkRequest{Msg: &evorav1.WorkRequest_Drain{Drain: &evorav1.WorkerDrain{}}})
	w.heartbeat(s)
}

func (w *worker) waitEnd(s *session) {
	timeout := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-s.msgs:
			if !ok {
				return
			}
		case <-timeout:
			return
		}
	}
}

func (w *worker) handle(s *session, m *evorav1.WorkResponse) {
	switch msg := m.GetMsg().(type) {
	case *evorav1.WorkResponse_Job:
		w.start(s, msg.Job)
	case *evorav1.WorkResponse_Ack:
		a := msg.Ack
		r, ok := w.pending[a.GetJobId()]
		if !ok {
			return
		}
		if !a.GetAccepted() && a.GetReason() == "internal error; retry the write" && r.tries < 3 {
			r.tries++
			w.log.Warn("report not stored; sending it again", "job_id", a.GetJobId())
			_ = s.stream.Send(r.req)
			return
		}
		delete(w.pending, a.GetJobId())
		w.acked++
		if a.GetAccepted() {
			w.log.Info("report acknowledged", "job_id", a.GetJobId())
		} else {
			w.log.Warn("report rejected", "job_id", a.GetJobId(), "reason", a.GetReason())
		}
		w.markIdle()
		if !w.stop && w.cfg.maxJobs > 0 && w.acked >= w.cfg.maxJobs {
			w.log.Info("reached -max-jobs; draining", "max_jobs", w.cfg.maxJobs)
			w.beginStop(s)
		}
	case *evorav1.WorkResponse_Cancel:
		if t, ok := w.running[msg.Cancel.GetJobId()]; ok {
			w.log.Info("job cancelled by an operator", "job_id", t.id)
			t.cancel(errCancelled)
		}
	case *evorav1.WorkResponse_LeaseLost:
		if t, ok := w.running[msg.LeaseLost.GetJobId()]; ok {
			w.log.Warn("lease lost; abandoning the job", "job_id", t.id, "reason", msg.LeaseLost.GetReason())
			t.lost = true
			t.cancel(errLeaseLost)
		}
	case *evorav1.WorkResponse_HeartbeatAck:
		if s.fenceSet {
			s.fenced = true
		}
		for _, l := range msg.HeartbeatAck.GetLeases() {
			if t, ok := w.running[l.GetJobId()]; ok && l.GetCancelRequested() {
				t.cancel(errCancelled)
			}
		}
	case *evorav1.WorkResponse_Drain:
		// The server is shutting down: it sends nothing new; we finish what we hold and
		// reconnect (to this server once it is back, or another one) when it closes.
		w.log.Info("server asked to drain", "reason", msg.Drain.GetReason(), "running", len(w.running))
	}
}

// start runs a leased job in its own goroutine.
func (w *worker) start(s *session, lj *evorav1.LeasedJob) {
	j := lj.GetJob()
	ctx, cancel := context.WithCancelCause(context.Background())
	t := &task{id: j.GetId(), token: lj.GetLeaseToken(), cancel: cancel}
	w.running[t.id] = t
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
	delete(w.running, t.id)
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
			w.log.Info("job done", "job_id", t.id)
		}
	}
	if o.err != nil {
		var je *jobError
		nonRetryable := errors.As(o.err, &je) && !je.retryable
		req = &evorav1.WorkRequest{Msg: &evorav1.WorkRequest_Fail{Fail: &evorav1.WorkerFail{
			JobId: t.id, LeaseToken: t.token, Error: o.err.Error(), NonRetryable: nonRetryable,
		}}}
		w.log.Info("job failed", "job_id", t.id, "err", o.err, "retryable", !nonRetryable)
	}
	w.pending[t.id] = &report{req: req, tries: 1}
	_ = s.stream.Send(req) // on error the stream's end reconnects, and the report is sent again
}

// heartbeat extends every lease the worker holds (an empty one is a plain keep-alive).
func (w *worker) heartbeat(s *session) {
	hb := &evorav1.WorkerHeartbeat{}
	for _, t := range w.running {
		if !t.lost {
			hb.Leases = append(hb.Leases, &evorav1.Lease{JobId: t.id, LeaseToken: t.token})
		}
	}
	_ = s.stream.Send(&evorav1.WorkRequest{Msg: &evorav1.WorkRequest_Heartbeat{Heartbeat: hb}})
}

func (w *worker) markIdle() {
	if w.finished() {
		w.idle = time.Now()
	}
}

// sleep waits between reconnects; a signal while nothing is held exits at once.
func (w *worker) sleep(d time.Duration, sigs <-chan os.Signal) (int, bool) {
	select {
	case <-time.After(d):
		return 0, false
	case sig := <-sigs:
		if w.finished() {
			w.log.Info("exiting", "signal", sig)
			return 0, true
		}
		if w.stop {
			return 1, true
		}
		w.stop = true
		w.stopAt = time.Now()
		return 0, false
	}
}

func leaseToken(req *evorav1.WorkRequest) string {
	if c := req.GetComplete(); c != nil {
		return c.GetLeaseToken()
	}
	return req.GetFail().GetLeaseToken()
}
