package compaction_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/compaction-sidecar/compaction-sidecar/clients/go/compaction"
	pb "github.com/compaction-sidecar/compaction-sidecar/clients/go/compactionv1"
)

func asError(t *testing.T, err error) *compaction.Error {
	t.Helper()
	var e *compaction.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *compaction.Error", err, err)
	}
	return e
}

func TestBadRoleNamesTheFieldInBadRequest(t *testing.T) {
	idErr1 := uniqueID("go-err-1")
	client, ctx := dial(t), ctxFor(t)
	_, err := client.Session(idErr1).Append(ctx, []*pb.Event{
		compaction.User("fine"),
		{Id: "x", Text: "no role"},
	}, &compaction.AppendOptions{CreateIfMissing: true})
	e := asError(t, err)
	if e.Code != codes.InvalidArgument || e.Field() != "events[1].role" || !errors.Is(err, compaction.ErrInvalidArgument) {
		t.Fatalf("error = %+v, want InvalidArgument on events[1].role", e)
	}
	// The status as received, google.rpc details included, for code that
	// only knows gRPC.
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.InvalidArgument {
		t.Fatalf("status.FromError = %v, %v", st, ok)
	}
	var bad *errdetails.BadRequest
	for _, d := range st.Details() {
		if b, ok := d.(*errdetails.BadRequest); ok {
			bad = b
		}
	}
	if bad == nil || bad.GetFieldViolations()[0].GetField() != "events[1].role" {
		t.Fatalf("details = %v, want a BadRequest naming events[1].role", st.Details())
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("status.Code = %v", status.Code(err))
	}
}

func TestVersionMismatchCarriesTheCurrentVersion(t *testing.T) {
	idErr2 := uniqueID("go-err-2")
	client, ctx := dial(t), ctxFor(t)
	chat := client.Session(idErr2)
	first, err := chat.Append(ctx, []*pb.Event{compaction.User("hi")}, &compaction.AppendOptions{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = chat.Append(ctx, []*pb.Event{compaction.Assistant("hello")}, &compaction.AppendOptions{ExpectedVersion: first.GetVersion() + 5})
	e := asError(t, err)
	if !errors.Is(err, compaction.ErrFailedPrecondition) || e.Reason != "VERSION_MISMATCH" || e.CurrentVersion != first.GetVersion() {
		t.Fatalf("error = %+v, want FailedPrecondition VERSION_MISMATCH at version %d", e, first.GetVersion())
	}
	if _, err := chat.Compact(ctx, &compaction.CompactOptions{Force: true, ExpectedVersion: 99}); !errors.Is(err, compaction.ErrFailedPrecondition) {
		t.Fatalf("Compact at a stale version: %v", err)
	}
}

func TestMissingAndTakenSessions(t *testing.T) {
	idErrAbsent := uniqueID("go-err-absent")
	idErr3 := uniqueID("go-err-3")
	client, ctx := dial(t), ctxFor(t)
	_, err := client.Session(idErrAbsent).Context(ctx)
	if !errors.Is(err, compaction.ErrNotFound) || errors.Is(err, compaction.ErrAlreadyExists) {
		t.Fatalf("Context of an absent session: %v", err)
	}
	if !strings.Contains(err.Error(), idErrAbsent) {
		t.Fatalf("message %q does not name the session", err)
	}
	if _, err := client.Session(idErrAbsent).Watch(ctx); !errors.Is(err, compaction.ErrNotFound) {
		t.Fatalf("Watch of an absent session: %v", err)
	}
	if _, err := client.CreateSession(ctx, idErr3, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CreateSession(ctx, idErr3, nil, nil); !errors.Is(err, compaction.ErrAlreadyExists) {
		t.Fatalf("CreateSession of a taken id: %v", err)
	}
}

func TestInvalidPolicyNamesTheField(t *testing.T) {
	idErr4 := uniqueID("go-err-4")
	client, ctx := dial(t), ctxFor(t)
	policy := mustPolicy(t, `{"strategy": {"slidingWindow": {"maxEvents": 0}}}`)
	_, err := client.CreateSession(ctx, idErr4, policy, nil)
	if e := asError(t, err); e.Field() != "policy.strategy.sliding_window.max_events" {
		t.Fatalf("error = %+v", e)
	}
	if _, err := compaction.PolicyFromJSON(`{"strategy": {"noSuchStrategy": {}}}`); err == nil {
		t.Fatal("PolicyFromJSON accepted an unknown field")
	}
}
