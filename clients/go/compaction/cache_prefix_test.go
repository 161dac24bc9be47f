package compaction_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/compaction-sidecar/compaction-sidecar/clients/go/compaction"
	pb "github.com/compaction-sidecar/compaction-sidecar/clients/go/compactionv1"
)

// cacheTurn is a user question and its answer, u<n> and a<n>.
func cacheTurn(n int, question string) []*pb.Event {
	return []*pb.Event{
		{Id: fmt.Sprintf("u%d", n), Role: pb.Role_ROLE_USER, Text: question},
		{Id: fmt.Sprintf("a%d", n), Role: pb.Role_ROLE_ASSISTANT, Text: fmt.Sprintf("answer %d", n)},
	}
}

func mustContext(t *testing.T, s *compaction.Session) *pb.GetContextResponse {
	t.Helper()
	window, err := s.Context(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	return window
}

// The id stays while the window only grows at its end, and a compaction and
// a restore each give a new one; the stable prefix is the window as the last
// of them left it.
func TestCachePrefixIDMovesOnlyWhenTheWindowChangesBeforeItsEnd(t *testing.T) {
	client := dial(t)
	ctx := ctxFor(t)
	id := uniqueID("cache")
	if _, err := client.CreateSession(ctx, id, mustPolicy(t, `{"strategy": {"slidingWindow": {"maxEvents": 2}}}`), nil); err != nil {
		t.Fatal(err)
	}
	s := client.Session(id)
	mustAppend := func(events []*pb.Event) {
		t.Helper()
		if _, err := s.Append(ctx, events, nil); err != nil {
			t.Fatal(err)
		}
	}
	mustAppend(cacheTurn(1, "question 1"))
	first := mustContext(t, s)
	if len(first.GetCachePrefixId()) != 32 || first.GetStablePrefixTokens() != 0 || first.GetStablePrefixEvents() != 0 {
		t.Fatalf("first window: id %q, stable prefix %d tokens, %d events", first.GetCachePrefixId(),
			first.GetStablePrefixTokens(), first.GetStablePrefixEvents())
	}
	mustAppend(cacheTurn(2, "question 2"))
	if got := mustContext(t, s).GetCachePrefixId(); got != first.GetCachePrefixId() {
		t.Fatalf("an append moved the id: %q, was %q", got, first.GetCachePrefixId())
	}

	if _, err := s.Compact(ctx, &compaction.CompactOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	compacted := mustContext(t, s)
	if compacted.GetCachePrefixId() == first.GetCachePrefixId() {
		t.Fatal("a compaction kept the id")
	}
	if int(compacted.GetStablePrefixEvents()) != len(compacted.GetEvents()) ||
		compacted.GetStablePrefixTokens() != compacted.GetTokenCount() {
		t.Fatalf("after the compaction: stable prefix %d events, %d tokens; the window %d, %d",
			compacted.GetStablePrefixEvents(), compacted.GetStablePrefixTokens(),
			len(compacted.GetEvents()), compacted.GetTokenCount())
	}

	mustAppend(cacheTurn(3, "question 3"))
	grown := mustContext(t, s)
	if grown.GetCachePrefixId() != compacted.GetCachePrefixId() ||
		grown.GetStablePrefixTokens() != compacted.GetStablePrefixTokens() || grown.GetStablePrefixEvents() != 2 {
		t.Fatalf("after an append: id %q (was %q), stable prefix %d tokens, %d events", grown.GetCachePrefixId(),
			compacted.GetCachePrefixId(), grown.GetStablePrefixTokens(), grown.GetStablePrefixEvents())
	}
	if got, want := ids(grown.GetEvents()[:grown.GetStablePrefixEvents()]), ids(compacted.GetEvents()); !slices.Equal(got, want) {
		t.Fatalf("stable prefix %v, want the compacted window %v", got, want)
	}

	if _, err := s.Restore(ctx, "", nil); err != nil {
		t.Fatal(err)
	}
	restored := mustContext(t, s)
	if restored.GetCachePrefixId() == first.GetCachePrefixId() || restored.GetCachePrefixId() == compacted.GetCachePrefixId() {
		t.Fatalf("a restore gave an earlier id again: %q", restored.GetCachePrefixId())
	}
	if int(restored.GetStablePrefixEvents()) != len(restored.GetEvents()) {
		t.Fatalf("after the restore: stable prefix %d events of %d", restored.GetStablePrefixEvents(), len(restored.GetEvents()))
	}
}

// A window too large for one answer comes without content and is read in
// ListEvents pages: the id and the stable prefix are the header answer's.
func TestAWindowReadInPartsKeepsItsCachePrefix(t *testing.T) {
	client, _ := dialSmallLimit(t)
	ctx := ctxFor(t)
	if _, err := client.CreateSession(ctx, "big", mustPolicy(t, `{"strategy": {"slidingWindow": {"maxEvents": 4}}}`), nil); err != nil {
		t.Fatal(err)
	}
	s := client.Session("big")
	for n := range 4 {
		if _, err := s.Append(ctx, cacheTurn(n, fmt.Sprintf("q%d %s", n, strings.Repeat("x", 1500))), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Compact(ctx, &compaction.CompactOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	late := []*pb.Event{{Id: "late", Role: pb.Role_ROLE_USER, Text: strings.Repeat("y", 1500)}}
	if _, err := s.Append(ctx, late, nil); err != nil {
		t.Fatal(err)
	}
	header, err := client.Stub().GetContext(ctx, &pb.GetContextRequest{SessionId: "big"})
	if err != nil {
		t.Fatal(err)
	}
	window := mustContext(t, s)

	if !header.GetContentOmitted() || window.GetContentOmitted() {
		t.Fatalf("contentOmitted: header %v, window %v; want the window read in parts", header.GetContentOmitted(), window.GetContentOmitted())
	}
	if got, want := ids(window.GetEvents()), []string{"u2", "a2", "u3", "a3", "late"}; !slices.Equal(got, want) {
		t.Fatalf("window %v, want %v", got, want)
	}
	if len(window.GetCachePrefixId()) != 32 || window.GetCachePrefixId() != header.GetCachePrefixId() ||
		window.GetStablePrefixEvents() != 4 || window.GetStablePrefixTokens() != header.GetStablePrefixTokens() {
		t.Fatalf("window: id %q, stable prefix %d tokens, %d events; header: %q, %d tokens",
			window.GetCachePrefixId(), window.GetStablePrefixTokens(), window.GetStablePrefixEvents(),
			header.GetCachePrefixId(), header.GetStablePrefixTokens())
	}
	var prefixTokens int32
	for _, e := range window.GetEvents()[:4] {
		prefixTokens += e.GetTokenCount()
	}
	if window.GetStablePrefixTokens() != prefixTokens {
		t.Fatalf("stable prefix %d tokens, its events count %d", window.GetStablePrefixTokens(), prefixTokens)
	}
}
