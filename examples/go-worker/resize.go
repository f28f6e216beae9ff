package main

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
)

// JobType is the one job type this worker runs.
const JobType = "resize"

// jobError is a failed attempt. Retryable ones go back to the queue (its backoff decides
// when they run again); the others go straight to the dead-letter queue.
type jobError struct {
	msg       string
	retryable bool
}

func (e *jobError) Error() string { return e.msg }

func retryable(format string, args ...any) error {
	return &jobError{msg: fmt.Sprintf(format, args...), retryable: true}
}

func permanent(format string, args ...any) error {
	return &jobError{msg: fmt.Sprintf(format, args...), retryable: false}
}

// resize "resizes" an image: it computes the thumbnail's size so that its longer side is
// at most max_side, keeping the aspect ratio. The arithmetic is integer-only so the Go
// and Python workers give the same answer.
//
// Payload:
//
//	image               string, required (e.g. "cat.png")
//	width, height       positive whole numbers, required
//	max_side            positive whole number, default 256
//	sleep_ms            pretend the work takes this long (cancellable), default 0
//	fail_until_attempt  fail (retryable) every attempt numbered below this, default 0
//	fail                "retryable": fail every attempt; "permanent": fail without retry
//
// Result: {image, thumbnail, width, height, attempt, worker}.
func resize(ctx context.Context, job jobInfo) (map[string]any, error) {
	p := job.payload.GetFields()
	switch str(p["fail"]) {
	case "":
	case "retryable":
		return nil, retryable("asked to fail (attempt %d)", job.attempt)
	case "permanent":
		return nil, permanent("asked to fail permanently")
	default:
		return nil, permanent(`bad payload: fail must be "retryable" or "permanent"`)
	}
	if n, ok := whole(p["fail_until_attempt"]); ok && int64(job.attempt) < n {
		return nil, retryable("simulated failure on attempt %d (fail_until_attempt=%d)", job.attempt, n)
	}

	image := str(p["image"])
	if image == "" {
		return nil, permanent("bad payload: image must be a non-empty string")
	}
	w, okW := whole(p["width"])
	h, okH := whole(p["height"])
	if !okW || !okH || w <= 0 || h <= 0 {
		return nil, permanent("bad payload: width and height must be positive whole numbers")
	}
	maxSide := int64(256)
	if v, present := p["max_side"]; present {
		n, ok := whole(v)
		if !ok || n <= 0 {
			return nil, permanent("bad payload: max_side must be a positive whole number")
		}
		maxSide = n
	}

	if ms, ok := whole(p["sleep_ms"]); ok && ms > 0 {
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}

	tw, th := w, h
	if long := max(w, h); long > maxSide {
		// round(x * maxSide / long), half up, in integers
		tw = (2*w*maxSide + long) / (2 * long)
		th = (2*h*maxSide + long) / (2 * long)
	}
	ext := path.Ext(image)
	thumb := fmt.Sprintf("%s_%dx%d%s", strings.TrimSuffix(image, ext), tw, th, ext)
	return map[string]any{
		"image":     image,
		"thumbnail": thumb,
		"width":     tw,
		"height":    th,
		"attempt":   job.attempt,
		"worker":    job.workerID,
	}, nil
}

func str(v *structpb.Value) string {
	if s, ok := v.GetKind().(*structpb.Value_StringValue); ok {
		return s.StringValue
	}
	return ""
}

// whole returns v as an integer if it is a JSON number without a fractional part.
func whole(v *structpb.Value) (int64, bool) {
	n, ok := v.GetKind().(*structpb.Value_NumberValue)
	if !ok || n.NumberValue != float64(int64(n.NumberValue)) {
		return 0, false
	}
	return int64(n.NumberValue), true
}
