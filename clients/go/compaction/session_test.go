package compaction_test

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/compaction-sidecar/compaction-sidecar/clients/go/compaction"
	pb "github.com/compaction-sidecar/compaction-sidecar/clients/go/compactionv1"
)

func ids(events []*pb.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.GetId()
	}
	return out
}

func collect[T any](t *testing.T, seq func(func(T, error) bool)) []T {
	t.Helper()
	var out []T
	for item, err := range seq {
		if err != nil {
			t.Fatalf("iteration: %v", err)
		}
		out = append(out, item)
	}
	return out
}

func TestSlidingWindowArchivesOldTurnsThatStaySearchable(t *testing.T) {
	idSw1 := uniqueID("go-sw-1")
	client, ctx := dial(t), ctxFor(t)
	policy := mustPolicy(t, `{"strategy": {"slidingWindow": {"maxEvents": 2}}}`)
	if _, err := client.CreateSession(ctx, idSw1, policy, map[string]string{"lang": "go"}); err != nil {
		t.Fatal(err)
	}
	chat := client.Session(idSw1)
	appended, err := chat.Append(ctx, []*pb.Event{
		compaction.System("You are an SRE agent."),
		{Id: "u1", Role: pb.Role_ROLE_USER, Text: "The disk on node-7 is full."},
		{Id: "a1", Role: pb.Role_ROLE_ASSISTANT, Text: "Rotating logs on node-7."},
		{Id: "u2", Role: pb.Role_ROLE_USER, Text: "Now check memory."},
		{Id: "a2", Role: pb.Role_ROLE_ASSISTANT, Text: "Memory is fine."},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	system := appended.GetEvents()[0].GetId()
	if len(system) != 32 {
		t.Fatalf("an event without id got id %q, want 32 hex digits from the client", system)
	}

	result, err := chat.Compact(ctx, &compaction.CompactOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if !result.GetCompacted() || !slices.Equal(ids(result.GetArchivedEvents()), []string{"u1", "a1"}) {
		t.Fatalf("compaction archived %v (compacted=%v), want [u1 a1]", ids(result.GetArchivedEvents()), result.GetCompacted())
	}

	window, err := chat.Context(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(window.GetEvents()), []string{system, "u2", "a2"}; !slices.Equal(got, want) {
		t.Fatalf("context = %v, want %v (system message kept in place)", got, want)
	}
	if window.GetVersion() != result.GetVersion() {
		t.Fatalf("context version %d, compaction version %d", window.GetVersion(), result.GetVersion())
	}

	log := collect(t, chat.Events(ctx, false))
	var archived []string
	for _, e := range log {
		if e.GetArchived() {
			archived = append(archived, e.GetId())
		}
	}
	if len(log) != 5 || !slices.Equal(archived, []string{"u1", "a1"}) {
		t.Fatalf("log = %v archived %v, want all 5 events with u1, a1 archived", ids(log), archived)
	}

	hits := collect(t, chat.Search(ctx, "disk", nil))
	if len(hits) != 1 || hits[0].GetEvent().GetId() != "u1" || hits[0].GetSessionId() != idSw1 {
		t.Fatalf("search disk = %v, want the archived u1", hits)
	}
	if hits := collect(t, chat.Search(ctx, "memory", nil)); len(hits) != 0 {
		t.Fatalf("search of the active window without IncludeActive found %d hits", len(hits))
	}
	if hits := collect(t, chat.Search(ctx, "memory", &compaction.SearchOptions{IncludeActive: true})); len(hits) == 0 {
		t.Fatal("search with IncludeActive found nothing")
	}

	session, err := chat.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if session.GetLabels()["lang"] != "go" || session.GetTotalEventCount() != 5 {
		t.Fatalf("session = %v", session)
	}
}

func TestEventsAndListSessionsFetchEveryPage(t *testing.T) {
	idPages1 := uniqueID("go-pages-1")
	idLsA := uniqueID("go-ls-a")
	idLsB := uniqueID("go-ls-b")
	idList := uniqueID("go-list")
	client, ctx := dial(t), ctxFor(t)
	chat := client.Session(idPages1)
	var batch []*pb.Event
	for i := range 130 { // more than one default page of 100
		if i%2 == 0 {
			batch = append(batch, compaction.User("question"))
		} else {
			batch = append(batch, compaction.Assistant("answer"))
		}
	}
	appended, err := chat.Append(ctx, batch, &compaction.AppendOptions{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	log := collect(t, chat.Events(ctx, false))
	if !slices.Equal(ids(log), ids(appended.GetEvents())) {
		t.Fatalf("Events yielded %d events, want the 130 appended in order", len(log))
	}
	// Stop early: the iteration must end without fetching further.
	for range chat.Events(ctx, false) {
		break
	}

	for _, id := range []string{idLsA, idLsB} {
		if _, err := client.CreateSession(ctx, id, nil, map[string]string{"suite": idList}); err != nil {
			t.Fatal(err)
		}
	}
	var listed []string
	for s, err := range client.ListSessions(ctx, map[string]string{"suite": idList}) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, s.GetSessionId())
	}
	if !slices.Equal(listed, []string{idLsA, idLsB}) {
		t.Fatalf("ListSessions = %v", listed)
	}
}

func TestUpdateAndDeleteSession(t *testing.T) {
	idUpd1 := uniqueID("go-upd-1")
	client, ctx := dial(t), ctxFor(t)
	created, err := client.CreateSession(ctx, idUpd1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	policy := mustPolicy(t, `{"trigger": {"turnCount": 4}, "strategy": {"turnWindow": {"maxTurns": 2}}}`)
	updated, err := client.UpdateSession(ctx, &pb.Session{SessionId: idUpd1, Policy: policy}, []string{"policy"}, created.GetVersion())
	if err != nil {
		t.Fatal(err)
	}
	if updated.GetPolicy().GetStrategy().GetTurnWindow().GetMaxTurns() != 2 || updated.GetVersion() <= created.GetVersion() {
		t.Fatalf("updated = %v", updated)
	}
	if err := client.DeleteSession(ctx, idUpd1); err != nil {
		t.Fatal(err)
	}
	if _, err := client.GetSession(ctx, idUpd1); err == nil {
		t.Fatal("a deleted session is still there")
	}
}

func TestLabelUpdatesLandWithTheAppendOrNotAtAll(t *testing.T) {
	idChat := uniqueID("go-lu-chat")
	idIndex := uniqueID("go-lu-index")
	client, ctx := dial(t), ctxFor(t)
	chat := client.Session(idChat)
	labels := func(id string) map[string]string {
		t.Helper()
		s, err := client.GetSession(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return s.GetLabels()
	}
	_, err := chat.Append(ctx, []*pb.Event{{Id: "u1", Role: pb.Role_ROLE_USER, Text: "open ticket 42"}}, &compaction.AppendOptions{
		CreateIfMissing: true,
		LabelUpdates: []*pb.LabelUpdate{
			{Set: map[string]string{"ticket": "42", "state": "open"}},
			{SessionId: idIndex, Set: map[string]string{"latest": "42"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	opened := map[string]string{"ticket": "42", "state": "open"}
	if got := labels(idChat); !maps.Equal(got, opened) {
		t.Fatalf("labels of the session = %v, want %v", got, opened)
	}
	index, err := client.GetSession(ctx, idIndex)
	if err != nil {
		t.Fatal(err)
	}
	if got := index.GetLabels(); !maps.Equal(got, map[string]string{"latest": "42"}) {
		t.Fatalf("labels of the other session = %v, want latest=42", got)
	}

	_, err = chat.Append(ctx, []*pb.Event{{Id: "u2", Role: pb.Role_ROLE_USER, Text: "close ticket 42"}}, &compaction.AppendOptions{
		LabelUpdates: []*pb.LabelUpdate{
			{Remove: []string{"state"}},
			{SessionId: idIndex, Set: map[string]string{"latest": "43"}, ExpectedVersion: index.GetVersion() + 5},
		},
	})
	if !errors.Is(err, compaction.ErrFailedPrecondition) {
		t.Fatalf("append with a stale label update version: %v, want FailedPrecondition", err)
	}
	if got := ids(collect(t, chat.Events(ctx, false))); !slices.Equal(got, []string{"u1"}) {
		t.Fatalf("log = %v, want [u1]: nothing of the failed append stored", got)
	}
	if got := labels(idChat); !maps.Equal(got, opened) {
		t.Fatalf("labels of the session after the failed append = %v, want %v", got, opened)
	}
	if got := labels(idIndex); !maps.Equal(got, map[string]string{"latest": "42"}) {
		t.Fatalf("labels of the other session after the failed append = %v, want latest=42", got)
	}
}
