package compaction_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/compaction-sidecar/compaction-sidecar/clients/go/compaction"
	pb "github.com/compaction-sidecar/compaction-sidecar/clients/go/compactionv1"
)

// compactedTwice makes a session with two forced compactions: the older
// archives turn 1, the newer turn 2; it returns their ids, older first.
func compactedTwice(t *testing.T, client *compaction.Client, id string) (string, string) {
	t.Helper()
	ctx := ctxFor(t)
	if _, err := client.CreateSession(ctx, id, mustPolicy(t, `{"strategy": {"slidingWindow": {"maxEvents": 2}}}`), nil); err != nil {
		t.Fatal(err)
	}
	s := client.Session(id)
	turn := func(n string) []*pb.Event {
		return []*pb.Event{
			{Id: "u" + n, Role: pb.Role_ROLE_USER, Text: "question " + n + " about the walrus"},
			{Id: "a" + n, Role: pb.Role_ROLE_ASSISTANT, Text: "answer " + n + ": the walrus sleeps"},
		}
	}
	var ids []string
	for _, batch := range [][]*pb.Event{append(turn("1"), turn("2")...), turn("3")} {
		if _, err := s.Append(ctx, batch, nil); err != nil {
			t.Fatal(err)
		}
		result, err := s.Compact(ctx, &compaction.CompactOptions{Force: true})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, result.GetCompactionId())
	}
	return ids[0], ids[1]
}

func history(t *testing.T, s *compaction.Session, opts *compaction.CompactionsOptions) []*pb.Compaction {
	t.Helper()
	var all []*pb.Compaction
	for c, err := range s.Compactions(ctxFor(t), opts) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, c)
	}
	return all
}

func contextIDs(t *testing.T, s *compaction.Session) []string {
	t.Helper()
	window, err := s.Context(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range window.GetEvents() {
		ids = append(ids, e.GetId())
	}
	return ids
}

// The history comes newest first across pages of one, and a search hit on an
// archived event names the compaction that archived it.
func TestCompactionsAreListedNewestFirstPageAfterPage(t *testing.T) {
	id := uniqueID("go-history")
	client := dial(t)
	older, newer := compactedTwice(t, client, id)
	s := client.Session(id)
	listed := history(t, s, &compaction.CompactionsOptions{PageSize: 1})
	if len(listed) != 2 || listed[0].GetCompactionId() != newer || listed[1].GetCompactionId() != older {
		t.Fatalf("history = %v, want [%s %s]", listed, newer, older)
	}
	if got := listed[1]; got.GetCause() != pb.CompactionCause_COMPACTION_CAUSE_FORCE ||
		!slices.Equal(got.GetArchivedEventIds(), []string{"u1", "a1"}) {
		t.Fatalf("older = %v", got)
	}
	for hit, err := range s.Search(ctxFor(t), "question 1", nil) {
		if err != nil {
			t.Fatal(err)
		}
		if hit.GetEvent().GetId() == "u1" && hit.GetArchivedBy() != older {
			t.Fatalf("hit on u1 archived by %q, want %q", hit.GetArchivedBy(), older)
		}
	}
}

// Restoring the newest compaction brings its events back in place, records
// the restore in the history, and pauses the trigger when asked.
func TestRestoreUndoesTheNewestCompaction(t *testing.T) {
	id := uniqueID("go-restore")
	client := dial(t)
	_, newer := compactedTwice(t, client, id)
	s := client.Session(id)
	result, err := s.Restore(ctxFor(t), "", &compaction.RestoreOptions{ExpectedVersion: 5, PauseAutoCompaction: true})
	if err != nil {
		t.Fatal(err)
	}
	if result.GetStrategy() != "restore" || !slices.Equal(result.GetRestoredEventIds(), []string{"u2", "a2"}) {
		t.Fatalf("restore = %v", result)
	}
	if got := contextIDs(t, s); !slices.Equal(got, []string{"u2", "a2", "u3", "a3"}) {
		t.Fatalf("context = %v", got)
	}
	listed := history(t, s, nil)
	if len(listed) != 3 || listed[0].GetCause() != pb.CompactionCause_COMPACTION_CAUSE_RESTORE ||
		listed[0].GetRestores() != newer || listed[1].GetRestoredBy() != result.GetCompactionId() {
		t.Fatalf("history = %v", listed)
	}
	session, err := s.Get(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	if !session.GetAutoCompactionPaused() {
		t.Fatal("auto compaction not paused")
	}
}

// Restoring an older compaction first is refused, naming the newer one, and
// changes nothing; an unknown id is not found.
func TestRestoreOutOfOrderIsRefused(t *testing.T) {
	id := uniqueID("go-restore-order")
	client := dial(t)
	older, newer := compactedTwice(t, client, id)
	s := client.Session(id)
	_, err := s.Restore(ctxFor(t), older, nil)
	var e *compaction.Error
	if !errors.Is(err, compaction.ErrFailedPrecondition) || !errors.As(err, &e) || !strings.Contains(e.Message, newer) {
		t.Fatalf("err = %v, want FailedPrecondition naming %s", err, newer)
	}
	if len(e.Preconditions) != 1 || e.Preconditions[0].GetSubject() != newer || e.Preconditions[0].GetType() != "RESTORE_ORDER" {
		t.Fatalf("preconditions = %v", e.Preconditions)
	}
	if _, err := s.Restore(ctxFor(t), "no-such-compaction", nil); !errors.Is(err, compaction.ErrNotFound) {
		t.Fatalf("err = %v, want NotFound", err)
	}
	if got := contextIDs(t, s); !slices.Equal(got, []string{"u3", "a3"}) {
		t.Fatalf("context = %v", got)
	}
}
