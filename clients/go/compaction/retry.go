package compaction

import (
	"context"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// RetryPolicy says how often and how patiently a call that failed with
// codes.Unavailable is repeated.
//
// Only calls that are safe to repeat are retried: the reads, and Append,
// whose events all carry an id chosen before the first attempt (the server
// answers a re-sent id with the event it stored). CreateSession,
// UpdateSession, DeleteSession, Compact, streams and watches never are:
// after a lost answer there is no telling "done" from "not done".
//
// Two bounds hold: at most MaxRetries repeats, and the call's deadline
// covers every attempt and backoff together.
type RetryPolicy struct {
	// MaxRetries is how many times a call is repeated after the first attempt.
	MaxRetries int
	// InitialBackoff is the ceiling of the first wait.
	InitialBackoff time.Duration
	// MaxBackoff caps every wait.
	MaxBackoff time.Duration
	// Multiplier grows the ceiling after each failed attempt.
	Multiplier float64
}

// DefaultRetryPolicy: 3 retries, backoff from 100ms doubling up to 2s.
var DefaultRetryPolicy = RetryPolicy{
	MaxRetries:     3,
	InitialBackoff: 100 * time.Millisecond,
	MaxBackoff:     2 * time.Second,
	Multiplier:     2,
}

// NoRetry never repeats a call.
var NoRetry = RetryPolicy{}

// Backoff is the wait after failed attempt number attempt (from 0): the
// ceiling InitialBackoff*Multiplier^attempt, capped at MaxBackoff, jittered
// down by up to half so that clients cut off together do not come back
// together.
func (p RetryPolicy) Backoff(attempt int) time.Duration {
	ceiling := float64(p.InitialBackoff)
	for range attempt {
		ceiling *= p.Multiplier
		if ceiling >= float64(p.MaxBackoff) {
			break
		}
	}
	ceiling = min(ceiling, float64(p.MaxBackoff))
	return time.Duration(ceiling/2 + rand.Float64()*ceiling/2)
}

// withTimeout gives ctx the client's default deadline when it has none.
func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || c.cfg.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.cfg.timeout)
}

// unary runs one call under the default deadline, repeated on Unavailable
// when retry is set (the caller vouches that repeating it is safe). The
// error is the last attempt's, as *Error, or Canceled / DeadlineExceeded
// when ctx ends during a backoff.
func unary[Resp any](ctx context.Context, c *Client, retry bool, call func(context.Context) (Resp, error)) (Resp, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	for attempt := 0; ; attempt++ {
		resp, err := call(ctx)
		if err == nil {
			return resp, nil
		}
		if !retry || !c.shouldRetry(ctx, err, attempt) {
			return resp, toError(err)
		}
		wait := c.cfg.retry.Backoff(attempt)
		if deadline, ok := ctx.Deadline(); ok && time.Now().Add(wait).After(deadline) {
			return resp, toError(err)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			// Cancelled (or past a deadline) mid-backoff: report that, as a call
			// cancelled mid-attempt does, not the Unavailable that led to the wait.
			timer.Stop()
			return resp, toError(ctx.Err())
		case <-timer.C:
		}
	}
}

func (c *Client) shouldRetry(ctx context.Context, err error, attempt int) bool {
	return ctx.Err() == nil && status.Code(err) == codes.Unavailable && attempt < c.cfg.retry.MaxRetries
}
