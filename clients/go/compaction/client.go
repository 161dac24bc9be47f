package compaction

import (
	"context"
	"fmt"
	"iter"
	"math"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/compaction-sidecar/compaction-sidecar/clients/go/compactionv1"
)

// Client is a connection to the compaction sidecar. It is safe for
// concurrent use; Close it when done.
type Client struct {
	conn *grpc.ClientConn
	stub pb.CompactionServiceClient
	cfg  config
}

// New makes a client without connecting: the connection is made by the
// first call (and remade after the sidecar restarts). Use Dial to wait
// until the sidecar is reachable.
func New(addr string, opts ...Option) (*Client, error) {
	cfg := newConfig(opts)
	// Reconnect quickly after the sidecar restarts: it is usually local, so
	// gRPC's default backoff (1s growing to 2 minutes) would only make calls
	// fail while the server is already back.
	dialOpts := []grpc.DialOption{
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
		// Answers of any size: the server bounds each by its --max-message-bytes
		// (16 MiB by default, past gRPC's 4 MiB receive default) and says
		// content_omitted past it.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)),
	}
	if cfg.tls != nil {
		dialOpts = append(dialOpts, grpc.WithTransportCredentials(credentials.NewTLS(cfg.tls)))
	} else {
		dialOpts = append(dialOpts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if cfg.token != "" {
		dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(bearerToken(cfg.token)))
	}
	conn, err := grpc.NewClient(addr, append(dialOpts, cfg.dialOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("compaction: %w", err)
	}
	return &Client{conn: conn, stub: pb.NewCompactionServiceClient(conn), cfg: cfg}, nil
}

// Dial makes a client and waits until its connection is up, or ctx ends
// (give it a deadline). The client then reconnects on its own.
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	c, err := New(addr, opts...)
	if err != nil {
		return nil, err
	}
	c.conn.Connect()
	for {
		state := c.conn.GetState()
		if state == connectivity.Ready {
			return c, nil
		}
		if !c.conn.WaitForStateChange(ctx, state) {
			_ = c.conn.Close()
			return nil, fmt.Errorf("compaction: dial %s: %w (last state %s)", addr, ctx.Err(), state)
		}
	}
}

// Close closes the connection; open streams and watches end.
func (c *Client) Close() error {
	return c.conn.Close()
}

// Stub is the generated client on the same connection (token and TLS
// included), for what this package does not wrap. Its calls get no retries
// and no default deadline, and return plain gRPC status errors.
func (c *Client) Stub() pb.CompactionServiceClient {
	return c.stub
}

// Session is a handle on one session's log; it makes no call.
func (c *Client) Session(id string) *Session {
	return &Session{client: c, ID: id}
}

// CreateOption sets a field of a CreateSession request beyond its id,
// policy and labels.
type CreateOption func(*pb.CreateSessionRequest)

// WithModel names the model the agent calls with the session's context
// (e.g. "gemini-2.5-flash"): the session then carries its ModelProfile. A
// model the server has no profile of is ErrInvalidArgument naming "model".
func WithModel(model string) CreateOption {
	return func(req *pb.CreateSessionRequest) { req.Model = model }
}

// CreateSession creates a session; a nil policy means the server's default.
//
// Not retried: after a lost answer, AlreadyExists could not tell our
// session from someone else's.
func (c *Client) CreateSession(ctx context.Context, id string, policy *pb.CompactionPolicy, labels map[string]string, opts ...CreateOption) (*pb.Session, error) {
	req := &pb.CreateSessionRequest{SessionId: id, Policy: policy, Labels: labels}
	for _, opt := range opts {
		opt(req)
	}
	return unary(ctx, c, false, func(ctx context.Context) (*pb.Session, error) {
		return c.stub.CreateSession(ctx, req)
	})
}

// GetSession returns a session's header (ErrNotFound if absent).
func (c *Client) GetSession(ctx context.Context, id string) (*pb.Session, error) {
	req := &pb.GetSessionRequest{SessionId: id}
	return unary(ctx, c, true, func(ctx context.Context) (*pb.Session, error) {
		return c.stub.GetSession(ctx, req)
	})
}

// ListSessions yields every session having all of labelFilter, in id
// order, fetching page after page; a failed fetch yields its error and ends
// the iteration.
func (c *Client) ListSessions(ctx context.Context, labelFilter map[string]string) iter.Seq2[*pb.Session, error] {
	return paged(func(token string) ([]*pb.Session, string, error) {
		req := &pb.ListSessionsRequest{LabelFilter: labelFilter, PageToken: token}
		page, err := unary(ctx, c, true, func(ctx context.Context) (*pb.ListSessionsResponse, error) {
			return c.stub.ListSessions(ctx, req)
		})
		return page.GetSessions(), page.GetNextPageToken(), err
	})
}

// UpdateSession replaces the fields of session named in paths ("policy",
// "labels", "model"); session.SessionId says which session. A nil policy
// with path "policy" removes the policy, an empty Model with path "model"
// the model. A non-zero expectedVersion fails with
// ErrFailedPrecondition (CurrentVersion set) unless the session is at it.
//
// Not retried: every update moves the version on, so a repeat is no no-op.
func (c *Client) UpdateSession(ctx context.Context, session *pb.Session, paths []string, expectedVersion int64) (*pb.Session, error) {
	req := &pb.UpdateSessionRequest{
		Session:         session,
		UpdateMask:      &fieldmaskpb.FieldMask{Paths: paths},
		ExpectedVersion: expectedVersion,
	}
	return unary(ctx, c, false, func(ctx context.Context) (*pb.Session, error) {
		return c.stub.UpdateSession(ctx, req)
	})
}

// DeleteSession deletes a session and its whole log. Not retried: a
// repeat would report NotFound.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	req := &pb.DeleteSessionRequest{SessionId: id}
	_, err := unary(ctx, c, false, func(ctx context.Context) (*pb.DeleteSessionResponse, error) {
		return c.stub.DeleteSession(ctx, req)
	})
	return err
}

// SearchOptions narrow a search; the zero value searches the archived
// events of every session.
type SearchOptions struct {
	// SessionID restricts the search to one session.
	SessionID string
	// Roles restricts the search to these roles.
	Roles []pb.Role
	// IncludeActive searches the active window too (archived events are
	// always searched).
	IncludeActive bool
	// Since and Until bound the events' times (zero: unbounded).
	Since, Until time.Time
	// PageSize is the number of hits fetched per call (0: the server's).
	PageSize int32
}

func (o *SearchOptions) request(query string) *pb.SearchEventsRequest {
	req := &pb.SearchEventsRequest{Query: query}
	if o == nil {
		return req
	}
	req.SessionId = o.SessionID
	req.Roles = o.Roles
	req.IncludeActive = o.IncludeActive
	req.PageSize = o.PageSize
	if !o.Since.IsZero() {
		req.Since = timestamppb.New(o.Since)
	}
	if !o.Until.IsZero() {
		req.Until = timestamppb.New(o.Until)
	}
	return req
}

// Search yields the hits of a full-text search, best first, page after
// page; the words are matched as plain terms, never as query syntax.
func (c *Client) Search(ctx context.Context, query string, opts *SearchOptions) iter.Seq2[*pb.SearchHit, error] {
	return paged(func(token string) ([]*pb.SearchHit, string, error) {
		req := opts.request(query)
		req.PageToken = token
		page, err := unary(ctx, c, true, func(ctx context.Context) (*pb.SearchEventsResponse, error) {
			return c.stub.SearchEvents(ctx, req)
		})
		return page.GetHits(), page.GetNextPageToken(), err
	})
}

// paged yields every item of every page: fetch(token) returns one page and
// the next token, empty on the last page.
func paged[T any](fetch func(token string) ([]T, string, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		token := ""
		for {
			items, next, err := fetch(token)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, item := range items {
				if !yield(item, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			token = next
		}
	}
}
