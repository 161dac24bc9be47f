package compaction

import (
	"context"
	"iter"

	pb "github.com/compaction-sidecar/compaction-sidecar/clients/go/compactionv1"
)

// Session is one session's log: append, stream, read the context, compact,
// restore, watch, list its events and compactions, and search. Get one from
// Client.Session; it is safe for concurrent use.
type Session struct {
	client *Client
	// ID is the session id.
	ID string
}

// Get returns the session's header.
func (s *Session) Get(ctx context.Context) (*pb.Session, error) {
	return s.client.GetSession(ctx, s.ID)
}

// AppendOptions qualify an append; nil means none.
type AppendOptions struct {
	// ExpectedVersion, when non-zero, makes the append fail with
	// ErrFailedPrecondition (CurrentVersion set) unless the session is at
	// this version.
	ExpectedVersion int64
	// CreateIfMissing creates the session, with the server's default
	// policy, if it is absent.
	CreateIfMissing bool
	// LabelUpdates are label changes stored in the same transaction as the
	// events: with them or not at all. An update with an empty SessionId is
	// on this session; another id names a session of the same tenant
	// (created, with no policy, when absent). An update's non-zero
	// ExpectedVersion fails the whole append with ErrFailedPrecondition
	// unless that session is at that version.
	LabelUpdates []*pb.LabelUpdate
	// Usage is what the provider reported for the model call made with the
	// context of Usage.ContextVersion (the GetContextResponse's Version):
	// it calibrates the session's token estimates. One the server cannot
	// take is no error: the response's UsageIgnoredReason says why.
	Usage *pb.ModelUsage
}

// Append stores a batch of events in one transaction; the server compacts
// if the session's trigger fires (the response's Compaction, or
// CompactionScheduled for a summarizing pass in the background).
//
// Events without an id get a random one here, before the first attempt, so
// a retry after a lost answer stores nothing twice (the caller's events are
// not modified; the response holds them as stored).
func (s *Session) Append(ctx context.Context, events []*pb.Event, opts *AppendOptions) (*pb.AppendEventsResponse, error) {
	req := &pb.AppendEventsRequest{SessionId: s.ID, Events: WithIDs(events)}
	if opts != nil {
		req.ExpectedVersion = opts.ExpectedVersion
		req.CreateIfMissing = opts.CreateIfMissing
		req.LabelUpdates = opts.LabelUpdates
		req.Usage = opts.Usage
	}
	c := s.client
	return unary(ctx, c, true, func(ctx context.Context) (*pb.AppendEventsResponse, error) {
		return c.stub.AppendEvents(ctx, req)
	})
}

// wholeWindowTries is how many times Context reads a window sent without
// content before it settles for the last reading.
const wholeWindowTries = 3

// Context returns the compacted context to send to the model: the active
// window in log order, with its version, tokens and turns.
//
// A window too large for one answer comes from the server without its
// events' content (ContentOmitted); Context then reads it in byte-bounded
// pages (ListEvents, active only) and puts it together, so the answer
// always holds every event's content. When the window changed between the
// two reads it is read again, a few times at most.
func (s *Session) Context(ctx context.Context) (*pb.GetContextResponse, error) {
	return s.ContextAs(ctx, pb.ContextFormat_CONTEXT_FORMAT_UNSPECIFIED)
}

// ContextAs is Context with the window also rendered as format's request
// fragment (RenderedJson, e.g. {"contents": [...]} for Gemini), ready to
// merge into the provider's request body; CONTEXT_FORMAT_UNSPECIFIED
// renders nothing. A window read in parts comes as events only: the server
// renders only what it sends in one answer, so RenderedJson is then empty
// (EstimatedPromptTokens is kept).
func (s *Session) ContextAs(ctx context.Context, format pb.ContextFormat) (*pb.GetContextResponse, error) {
	req := &pb.GetContextRequest{SessionId: s.ID, Format: format}
	c := s.client
	for attempt := 1; ; attempt++ {
		answer, err := unary(ctx, c, true, func(ctx context.Context) (*pb.GetContextResponse, error) {
			return c.stub.GetContext(ctx, req)
		})
		if err != nil || !answer.GetContentOmitted() {
			return answer, err
		}
		var listed []*pb.Event
		for event, err := range s.Events(ctx, true) {
			if err != nil {
				return nil, err
			}
			listed = append(listed, event)
		}
		same := sameWindow(listed, answer.GetEvents())
		if answer.GetEventsOmitted() {
			// Too many events to list even without content: nothing to compare the
			// pages with, so a second answer tells whether a write came in between.
			again, err := unary(ctx, c, true, func(ctx context.Context) (*pb.GetContextResponse, error) {
				return c.stub.GetContext(ctx, req)
			})
			if err != nil {
				return nil, err
			}
			same = again.GetVersion() == answer.GetVersion() && again.GetCachePrefixId() == answer.GetCachePrefixId()
		}
		if attempt >= wholeWindowTries || same {
			answer.Events = listed
			answer.ContentOmitted = false
			answer.EventsOmitted = false
			return answer, nil
		}
	}
}

// sameWindow tells whether a lists the same window as b (content aside). Ids
// alone are not enough: a clearing changes events in place, keeping their ids,
// and sets their flag and token count. A count that is an estimate on either
// side (TokenCountEstimated) is not compared: its exact count may have landed
// in between, which changes no version and nothing the model is sent.
func sameWindow(a, b []*pb.Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		estimated := a[i].GetTokenCountEstimated() || b[i].GetTokenCountEstimated()
		if a[i].GetId() != b[i].GetId() || a[i].GetCleared() != b[i].GetCleared() ||
			(a[i].GetTokenCount() != b[i].GetTokenCount() && !estimated) {
			return false
		}
	}
	return true
}

// CompactOptions qualify a compaction pass; nil means "if the trigger fires,
// with the session's policy".
type CompactOptions struct {
	// Force skips the trigger: the strategy runs now.
	Force bool
	// Policy overrides the session's policy for this pass.
	Policy *pb.CompactionPolicy
	// ExpectedVersion, when non-zero, fails the pass with
	// ErrFailedPrecondition unless the session is at this version.
	ExpectedVersion int64
}

// Compact runs a compaction pass now and waits for its result. A
// summarizing pass may take a while: give ctx a deadline that also suits
// the summarizer.
//
// Not retried: a lost answer may hide a pass that landed.
func (s *Session) Compact(ctx context.Context, opts *CompactOptions) (*pb.CompactionResult, error) {
	req := &pb.CompactRequest{SessionId: s.ID}
	if opts != nil {
		req.Force = opts.Force
		req.Policy = opts.Policy
		req.ExpectedVersion = opts.ExpectedVersion
	}
	c := s.client
	resp, err := unary(ctx, c, false, func(ctx context.Context) (*pb.CompactResponse, error) {
		return c.stub.Compact(ctx, req)
	})
	return resp.GetResult(), err
}

// Events yields the whole log in log order, archived events included
// unless activeOnly, page after page.
func (s *Session) Events(ctx context.Context, activeOnly bool) iter.Seq2[*pb.Event, error] {
	c := s.client
	return paged(func(token string) ([]*pb.Event, string, error) {
		req := &pb.ListEventsRequest{SessionId: s.ID, ActiveOnly: activeOnly, PageToken: token}
		page, err := unary(ctx, c, true, func(ctx context.Context) (*pb.ListEventsResponse, error) {
			return c.stub.ListEvents(ctx, req)
		})
		return page.GetEvents(), page.GetNextPageToken(), err
	})
}

// Search is Client.Search restricted to this session (opts.SessionID is
// ignored).
func (s *Session) Search(ctx context.Context, query string, opts *SearchOptions) iter.Seq2[*pb.SearchHit, error] {
	scoped := SearchOptions{}
	if opts != nil {
		scoped = *opts
	}
	scoped.SessionID = s.ID
	return s.client.Search(ctx, query, &scoped)
}
