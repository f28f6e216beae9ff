package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"
)

// config is the worker's command line (each flag may also come from an EVORA_* variable).
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
