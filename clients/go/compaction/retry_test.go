package compaction_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/compaction-sidecar/compaction-sidecar/clients/go/compaction"
	pb "github.com/compaction-sidecar/compaction-sidecar/clients/go/compactionv1"
	"github.com/compaction-sidecar/compaction-sidecar/clients/go/internal/testserver"
)

var fastRetries = compaction.RetryPolicy{
	MaxRetries: 3, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Multiplier: 2,
}

// lostAnswers is a client interceptor that lets the first n calls of a
// method reach the server and then reports codes.Unavailable, as when the
// answer is lost on the way back; it records every request sent.
type lostAnswers struct {
	method string
	n      int
	mu     sync.Mutex
	sent   []proto.Message
}

func (l *lostAnswers) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if method != l.method {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	l.mu.Lock()
	l.sent = append(l.sent, proto.Clone(req.(proto.Message)))
	lose := len(l.sent) <= l.n
	l.mu.Unlock()
	if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
		return err
	}
	if lose {
		return status.Error(codes.Unavailable, "answer lost (test)")
	}
	return nil
}

func TestRetriedAppendResendsTheSameIdsAndStoresNothingTwice(t *testing.T) {
	idRetry1 := uniqueID("go-retry-1")
	lost := &lostAnswers{method: "/compaction.v1.CompactionService/AppendEvents", n: 2}
	client := dial(t, compaction.WithRetryPolicy(fastRetries), compaction.WithDialOptions(grpc.WithChainUnaryInterceptor(lost.intercept)))
	ctx := ctxFor(t)
	chat := client.Session(idRetry1)

	resp, err := chat.Append(ctx, []*pb.Event{compaction.User("hello"), compaction.Assistant("hi")}, &compaction.AppendOptions{CreateIfMissing: true})
	if err != nil {
		t.Fatalf("append with two lost answers: %v", err)
	}
	if len(lost.sent) != 3 {
		t.Fatalf("%d attempts, want 3 (two lost answers, then the stored events)", len(lost.sent))
	}
	first := ids(lost.sent[0].(*pb.AppendEventsRequest).GetEvents())
	for _, attempt := range lost.sent[1:] {
		if got := ids(attempt.(*pb.AppendEventsRequest).GetEvents()); !slices.Equal(got, first) {
			t.Fatalf("retry sent ids %v, the first attempt %v", got, first)
		}
	}
	if !slices.Equal(ids(resp.GetEvents()), first) || resp.GetVersion() != 1 {
		t.Fatalf("answer %v at version %d, want the first attempt's events at version 1", ids(resp.GetEvents()), resp.GetVersion())
	}
	log := collect(t, chat.Events(ctx, false))
	if !slices.Equal(ids(log), first) {
		t.Fatalf("log = %v, want each event once: %v", ids(log), first)
	}
}

func TestCompactIsNeverRetried(t *testing.T) {
	idRetry2 := uniqueID("go-retry-2")
	lost := &lostAnswers{method: "/compaction.v1.CompactionService/Compact", n: 1}
	client := dial(t, compaction.WithRetryPolicy(fastRetries), compaction.WithDialOptions(grpc.WithChainUnaryInterceptor(lost.intercept)))
	ctx := ctxFor(t)
	if _, err := client.CreateSession(ctx, idRetry2, nil, nil); err != nil {
		t.Fatal(err)
	}
	_, err := client.Session(idRetry2).Compact(ctx, &compaction.CompactOptions{Force: true})
	if !errors.Is(err, compaction.ErrUnavailable) || len(lost.sent) != 1 {
		t.Fatalf("Compact: %v after %d attempts, want Unavailable after 1", err, len(lost.sent))
	}
}

func TestAppendRetriesUntilTheSidecarIsBack(t *testing.T) {
	idRestart1 := uniqueID("go-restart-1")
	bin, err := testserver.Binary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	server, err := testserver.StartAt(bin, dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := server.Addr
	// Retries for ~14s (ctxFor allows 20): a restarted Python server takes 1-2s to listen,
	// more on a loaded machine, and the test is about retrying until it does.
	client, err := compaction.New(addr, compaction.WithRetryPolicy(compaction.RetryPolicy{
		MaxRetries: 50, InitialBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond, Multiplier: 2,
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := ctxFor(t)
	chat := client.Session(idRestart1)
	if _, err := chat.Append(ctx, []*pb.Event{{Id: "u1", Role: pb.Role_ROLE_USER, Text: "before"}}, &compaction.AppendOptions{CreateIfMissing: true}); err != nil {
		t.Fatal(err)
	}

	server.Stop() // the sidecar restarts: down for a moment, same port, same database
	restarted := make(chan *testserver.Server, 1)
	go func() {
		time.Sleep(400 * time.Millisecond)
		s, err := testserver.StartAt(bin, dir, addr)
		if err != nil {
			t.Errorf("restart: %v", err)
		}
		restarted <- s
	}()
	start := time.Now()
	resp, err := chat.Append(ctx, []*pb.Event{{Id: "a1", Role: pb.Role_ROLE_ASSISTANT, Text: "after"}}, nil)
	if s := <-restarted; s != nil {
		defer s.Stop()
	}
	if err != nil {
		t.Fatalf("append across the restart: %v", err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("append returned after %v, before the server was back", waited)
	}
	if !slices.Equal(ids(resp.GetEvents()), []string{"a1"}) || resp.GetVersion() != 2 {
		t.Fatalf("append = %v at version %d", ids(resp.GetEvents()), resp.GetVersion())
	}
}

func TestRetriesStopAtTheDeadline(t *testing.T) {
	idDead1 := uniqueID("go-dead-1")
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := listener.Addr().String()
	_ = listener.Close() // nothing listens there now
	client, err := compaction.New(dead, compaction.WithRetryPolicy(compaction.RetryPolicy{
		MaxRetries: 1000, InitialBackoff: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Multiplier: 2,
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = client.Session(idDead1).Context(ctx)
	elapsed := time.Since(start)
	if code := status.Code(err); code != codes.Unavailable && code != codes.DeadlineExceeded {
		t.Fatalf("error %v, want Unavailable or DeadlineExceeded", err)
	}
	if elapsed > 800*time.Millisecond {
		t.Fatalf("retries went on for %v past a 500ms deadline", elapsed)
	}
}

func TestNoRetryFailsAtOnce(t *testing.T) {
	idNoretry := uniqueID("go-noretry")
	lost := &lostAnswers{method: "/compaction.v1.CompactionService/GetContext", n: 1}
	client := dial(t, compaction.WithRetryPolicy(compaction.NoRetry), compaction.WithDialOptions(grpc.WithChainUnaryInterceptor(lost.intercept)))
	ctx := ctxFor(t)
	if _, err := client.CreateSession(ctx, idNoretry, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Session(idNoretry).Context(ctx); !errors.Is(err, compaction.ErrUnavailable) || len(lost.sent) != 1 {
		t.Fatalf("Context: %v after %d attempts", err, len(lost.sent))
	}
}

func TestBackoffGrowsAndIsCapped(t *testing.T) {
	p := compaction.RetryPolicy{InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second, Multiplier: 2}
	for attempt, ceiling := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		ceiling *= time.Millisecond
		for range 20 {
			if d := p.Backoff(attempt); d < ceiling/2 || d > ceiling {
				t.Fatalf("Backoff(%d) = %v, want within [%v, %v]", attempt, d, ceiling/2, ceiling)
			}
		}
	}
}

func TestCancelMidBackoffIsCanceled(t *testing.T) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := listener.Addr().String()
	_ = listener.Close() // nothing listens there now: every attempt fails with Unavailable
	client, err := compaction.New(dead, compaction.WithRetryPolicy(compaction.RetryPolicy{
		MaxRetries: 10, InitialBackoff: 2 * time.Second, MaxBackoff: 2 * time.Second, Multiplier: 1,
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel) // during the first backoff (1s to 2s)
	start := time.Now()
	_, err = client.Session(uniqueID("go-cancel")).Get(ctx)
	if time.Since(start) > 900*time.Millisecond {
		t.Fatalf("the call went on %v after its context was cancelled", time.Since(start))
	}
	if !errors.Is(err, context.Canceled) || status.Code(err) != codes.Canceled {
		t.Fatalf("error %v (code %v), want Canceled as for a call cancelled mid-attempt", err, status.Code(err))
	}
}
