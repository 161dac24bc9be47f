package compaction_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"

	"github.com/compaction-sidecar/compaction-sidecar/clients/go/compaction"
	pb "github.com/compaction-sidecar/compaction-sidecar/clients/go/compactionv1"
	"github.com/compaction-sidecar/compaction-sidecar/clients/go/internal/testserver"
)

// A window too large for one answer comes without content and is read in
// ListEvents pages; when an append lands between the two reads, the pages
// hold another window than the answer, and Context reads both again.
func TestContextReadsAnOmittedWindowAgainWhenItChangedInBetween(t *testing.T) {
	plain, server := dialSmallLimit(t)
	ctx := ctxFor(t)
	var events []*pb.Event
	for i, id := range []string{"u1", "a1", "u2", "a2"} {
		role := pb.Role_ROLE_USER
		if i%2 == 1 {
			role = pb.Role_ROLE_ASSISTANT
		}
		events = append(events, &pb.Event{Id: id, Role: role, Text: id + strings.Repeat("x", 1500)})
	}
	if _, err := plain.Session("big").Append(ctx, events, &compaction.AppendOptions{CreateIfMissing: true}); err != nil {
		t.Fatal(err)
	}

	var contexts atomic.Int32
	lateAppend := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if strings.HasSuffix(method, "/GetContext") && contexts.Add(1) == 1 {
			late := []*pb.Event{{Id: "u3", Role: pb.Role_ROLE_USER, Text: "late"}}
			if _, err := plain.Session("big").Append(ctx, late, nil); err != nil {
				t.Errorf("late append: %v", err)
			}
		}
		return err
	}
	watched, err := compaction.Dial(ctx, server.Addr,
		compaction.WithDialOptions(grpc.WithChainUnaryInterceptor(lateAppend)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = watched.Close() })

	window, err := watched.Session("big").Context(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(window.GetEvents()), []string{"u1", "a1", "u2", "a2", "u3"}; !slices.Equal(got, want) {
		t.Fatalf("window %v, want %v", got, want)
	}
	if contexts.Load() != 2 {
		t.Fatalf("GetContext called %d times, want 2 (once more after the window changed)", contexts.Load())
	}
	if window.GetContentOmitted() || window.GetVersion() != 2 {
		t.Fatalf("contentOmitted %v, version %d", window.GetContentOmitted(), window.GetVersion())
	}
	for _, e := range window.GetEvents()[:4] {
		if len(e.GetText()) != len(e.GetId())+1500 {
			t.Fatalf("%s: %d bytes of text, want its content", e.GetId(), len(e.GetText()))
		}
	}
}

// The server answers up to its --max-message-bytes (16 MiB by default); the
// client kept gRPC's 4 MiB receive limit, so a window between the two could
// never be read again.
func TestAWindowPastGRPCsDefault4MiBIsReadInOneAnswer(t *testing.T) {
	server, err := testserver.Start("", "--default-policy", "none")
	if err != nil {
		t.Fatalf("start compaction-sidecar: %v", err)
	}
	t.Cleanup(server.Stop)
	ctx := ctxFor(t)
	client, err := compaction.Dial(ctx, server.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	session := client.Session("big")
	for i := range 5 {
		role := pb.Role_ROLE_ASSISTANT
		if i == 0 {
			role = pb.Role_ROLE_USER
		}
		event := []*pb.Event{{Id: fmt.Sprintf("e%d", i), Role: role, Text: strings.Repeat("x", 900_000)}}
		if _, err := session.Append(ctx, event, &compaction.AppendOptions{CreateIfMissing: true}); err != nil {
			t.Fatal(err)
		}
	}
	window, err := session.Context(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(window.GetEvents()), []string{"e0", "e1", "e2", "e3", "e4"}; !slices.Equal(got, want) || window.GetContentOmitted() {
		t.Fatalf("window %v (contentOmitted %v), want %v", got, window.GetContentOmitted(), want)
	}
}
