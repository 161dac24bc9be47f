package compaction

import (
	"context"
	"errors"
	"io"
	"iter"

	"google.golang.org/grpc"

	pb "github.com/compaction-sidecar/compaction-sidecar/clients/go/compactionv1"
)

// EventStream is an open StreamEvents call on one session: the fast path
// for appends. Send and Recv are independent (send from one goroutine and
// receive in another, or send a few and then read their acks); at most one
// goroutine may Send and one Recv at a time.
//
// It is never retried: a stream that breaks is reported, not silently
// reopened. To re-send a batch on a new stream without storing anything
// twice, give its events ids first (WithIDs) and re-send those events.
type EventStream struct {
	call      grpc.BidiStreamingClient[pb.StreamEventsRequest, pb.StreamEventsResponse]
	cancel    context.CancelFunc
	SessionID string
}

// StreamMessage is one message of an EventStream; exactly one of Ack, Err
// and Compaction is set.
type StreamMessage struct {
	// RequestID is the request this answers; empty for a background compaction.
	RequestID string
	// SessionID is the session the message is about.
	SessionID string
	// Ack is the stored append of a request that succeeded.
	Ack *pb.AppendEventsResponse
	// Err is the error of a request that failed (nothing of it was stored);
	// the stream goes on.
	Err *Error
	// Compaction is a background compaction of the session that landed.
	Compaction *pb.CompactionResult
}

// SendOptions qualify one append on a stream; nil means none.
type SendOptions struct {
	// RequestID is echoed on the answer; empty means a fresh random one.
	RequestID string
	// ExpectedVersion, CreateIfMissing and Usage are as in AppendOptions.
	ExpectedVersion int64
	CreateIfMissing bool
	Usage           *pb.ModelUsage
}

// Stream opens the fast path for appends. The call lasts until ctx ends,
// Close is called, or the server ends it; the client's default timeout
// does not apply.
func (s *Session) Stream(ctx context.Context) (*EventStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	call, err := s.client.stub.StreamEvents(ctx)
	if err != nil {
		cancel()
		return nil, toError(err)
	}
	return &EventStream{call: call, cancel: cancel, SessionID: s.ID}, nil
}

// Send sends one append and returns its request id. Events without an id
// get one first, as in Session.Append. An error here means the call itself
// broke; Recv returns why.
func (e *EventStream) Send(events []*pb.Event, opts *SendOptions) (string, error) {
	req := &pb.StreamEventsRequest{SessionId: e.SessionID, Events: WithIDs(events)}
	if opts != nil {
		req.RequestId = opts.RequestID
		req.ExpectedVersion = opts.ExpectedVersion
		req.CreateIfMissing = opts.CreateIfMissing
		req.Usage = opts.Usage
	}
	if req.RequestId == "" {
		req.RequestId = newID()
	}
	return req.RequestId, e.SendRequest(req)
}

// SendRequest sends a request as given (any session, the request id and
// event ids untouched), for callers that build requests themselves.
func (e *EventStream) SendRequest(req *pb.StreamEventsRequest) error {
	if err := e.call.Send(req); err != nil {
		if errors.Is(err, io.EOF) {
			return io.EOF
		}
		return toError(err)
	}
	return nil
}

// CloseSend says nothing more will be sent; Recv then returns the
// remaining answers and io.EOF once everything sent is answered.
func (e *EventStream) CloseSend() error {
	return e.call.CloseSend()
}

// Close cancels the call at once; answers not yet received are lost.
func (e *EventStream) Close() {
	e.cancel()
}

// Recv returns the next message: an ack, a request's error, or a
// background compaction. It returns io.EOF when the stream ended normally,
// and an *Error when the call failed (authentication, server gone,
// cancelled).
func (e *EventStream) Recv() (*StreamMessage, error) {
	resp, err := e.call.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, toError(err)
	}
	msg := &StreamMessage{RequestID: resp.GetRequestId(), SessionID: resp.GetSessionId()}
	switch r := resp.GetResult().(type) {
	case *pb.StreamEventsResponse_Append:
		msg.Ack = r.Append
	case *pb.StreamEventsResponse_Error:
		msg.Err = StatusError(r.Error)
	case *pb.StreamEventsResponse_Compaction:
		msg.Compaction = r.Compaction
	}
	return msg, nil
}

// Messages yields every message until the stream ends; a failed call
// yields its error last.
func (e *EventStream) Messages() iter.Seq2[*StreamMessage, error] {
	return func(yield func(*StreamMessage, error) bool) {
		for {
			msg, err := e.Recv()
			if errors.Is(err, io.EOF) {
				return
			}
			if !yield(msg, err) || err != nil {
				return
			}
		}
	}
}

// Watch is an open WatchSession call: every compaction result of the
// session as it lands. It is never retried: a silent reconnect would hide
// the results it missed.
type Watch struct {
	call   grpc.ServerStreamingClient[pb.WatchSessionResponse]
	cancel context.CancelFunc
}

// WatchUpdate is one message of a Watch; exactly one field is set.
type WatchUpdate struct {
	// Compaction is a compaction that landed, or a background pass that
	// failed (its Error set; the session is unchanged).
	Compaction *pb.CompactionResult
	// Missed is how many results were dropped because the watcher fell behind.
	Missed int32
}

// Watch subscribes to the session's compaction results and returns once
// the server has subscribed: no result landing after that is missed, and
// none that landed before is replayed. It fails with ErrNotFound for a
// session that does not exist. The call lasts until ctx ends or Close.
func (s *Session) Watch(ctx context.Context) (*Watch, error) {
	ctx, cancel := context.WithCancel(ctx)
	call, err := s.client.stub.WatchSession(ctx, &pb.WatchSessionRequest{SessionId: s.ID})
	if err != nil {
		cancel()
		return nil, toError(err)
	}
	// The server sends its headers once the subscription is in place; an
	// error (NotFound) comes as a trailers-only answer, which Header
	// reports as no headers.
	header, err := call.Header()
	if err == nil && header == nil {
		_, err = call.Recv()
	}
	if err != nil {
		cancel()
		return nil, toError(err)
	}
	return &Watch{call: call, cancel: cancel}, nil
}

// Recv blocks until the next update; it returns an *Error when the call
// ends (Canceled after Close, DeadlineExceeded at ctx's deadline).
func (w *Watch) Recv() (*WatchUpdate, error) {
	resp, err := w.call.Recv()
	if err != nil {
		return nil, toError(err)
	}
	if c := resp.GetCompaction(); c != nil {
		return &WatchUpdate{Compaction: c}, nil
	}
	return &WatchUpdate{Missed: resp.GetMissed()}, nil
}

// Updates yields updates until the call ends, and then the error it ended
// with (Canceled after Close).
func (w *Watch) Updates() iter.Seq2[*WatchUpdate, error] {
	return func(yield func(*WatchUpdate, error) bool) {
		for {
			update, err := w.Recv()
			if !yield(update, err) || err != nil {
				return
			}
		}
	}
}

// Close ends the call.
func (w *Watch) Close() {
	w.cancel()
}
