package compaction_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/compaction-sidecar/compaction-sidecar/clients/go/compaction"
	pb "github.com/compaction-sidecar/compaction-sidecar/clients/go/compactionv1"
)

func TestStreamAcksInOrderAndGoesOnAfterAFailedRequest(t *testing.T) {
	idStream1 := uniqueID("go-stream-1")
	client, ctx := dial(t), ctxFor(t)
	stream, err := client.Session(idStream1).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	r1, err := stream.Send([]*pb.Event{compaction.User("hello"), compaction.Assistant("hi")}, &compaction.SendOptions{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := stream.Send([]*pb.Event{{Id: "bad", Text: "no role"}}, &compaction.SendOptions{RequestID: "bad-one"})
	if err != nil {
		t.Fatal(err)
	}
	r3, err := stream.Send([]*pb.Event{compaction.User("still there?")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var got []*compaction.StreamMessage
	for msg, err := range stream.Messages() {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, msg)
	}
	if len(got) != 3 || got[0].RequestID != r1 || got[1].RequestID != "bad-one" || r2 != "bad-one" || got[2].RequestID != r3 {
		t.Fatalf("answers %v, want acks of %s, %s, %s in order", got, r1, r2, r3)
	}
	if got[0].Ack == nil || len(got[0].Ack.GetEvents()) != 2 || got[0].SessionID != idStream1 {
		t.Fatalf("first answer %+v, want an ack of two events", got[0])
	}
	if got[1].Err == nil || got[1].Err.Code != codes.InvalidArgument || !errors.Is(got[1].Err, compaction.ErrInvalidArgument) {
		t.Fatalf("second answer %+v, want an InvalidArgument error", got[1])
	}
	if got[2].Ack == nil || got[2].Ack.GetVersion() != 2 {
		t.Fatalf("third answer %+v, want an ack at version 2 (nothing of the failed request stored)", got[2])
	}
}

func TestWatchReceivesACompactionAsItLands(t *testing.T) {
	idWatch1 := uniqueID("go-watch-1")
	client, ctx := dial(t), ctxFor(t)
	policy := mustPolicy(t, `{"strategy": {"turnWindow": {"maxTurns": 1}}}`)
	if _, err := client.CreateSession(ctx, idWatch1, policy, nil); err != nil {
		t.Fatal(err)
	}
	chat := client.Session(idWatch1)
	watch, err := chat.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	if _, err := chat.Append(ctx, []*pb.Event{
		{Id: "u1", Role: pb.Role_ROLE_USER, Text: "one"}, {Id: "a1", Role: pb.Role_ROLE_ASSISTANT, Text: "1"},
		{Id: "u2", Role: pb.Role_ROLE_USER, Text: "two"}, {Id: "a2", Role: pb.Role_ROLE_ASSISTANT, Text: "2"},
	}, nil); err != nil {
		t.Fatal(err)
	}
	result, err := chat.Compact(ctx, &compaction.CompactOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	update, err := watch.Recv()
	if err != nil {
		t.Fatal(err)
	}
	c := update.Compaction
	if c == nil || c.GetCompactionId() != result.GetCompactionId() || !slices.Equal(ids(c.GetArchivedEvents()), []string{"u1", "a1"}) {
		t.Fatalf("watch update %v, want the compaction %s archiving u1, a1", update, result.GetCompactionId())
	}
}

func TestWatchEndsAtItsDeadlineAndOnCancel(t *testing.T) {
	idWatch2 := uniqueID("go-watch-2")
	client := dial(t)
	setup := ctxFor(t)
	if _, err := client.CreateSession(setup, idWatch2, nil, nil); err != nil {
		t.Fatal(err)
	}
	chat := client.Session(idWatch2)

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	watch, err := chat.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = watch.Recv()
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, compaction.ErrDeadlineExceeded) {
		t.Fatalf("Recv past the deadline: %v", err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Fatalf("Recv returned %v after a 300ms deadline", waited)
	}

	ctx, cancel = context.WithCancel(context.Background())
	watch, err = chat.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := watch.Recv(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Recv after cancel: %v", err)
	}
}

func TestUnaryCallHonoursTheContextDeadline(t *testing.T) {
	idDeadline1 := uniqueID("go-deadline-1")
	client, setup := dial(t), ctxFor(t)
	if _, err := client.CreateSession(setup, idDeadline1, nil, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	time.Sleep(time.Millisecond)
	_, err := client.Session(idDeadline1).Context(ctx)
	if e := asError(t, err); e.Code != codes.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Context with an expired deadline: %v", err)
	}
	short := dial(t, compaction.WithTimeout(time.Nanosecond))
	if _, err := short.GetSession(context.Background(), idDeadline1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the client's default timeout did not apply: %v", err)
	}
}
