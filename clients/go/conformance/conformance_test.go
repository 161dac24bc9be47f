package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/compaction-sidecar/compaction-sidecar/clients/go/compaction"
	pb "github.com/compaction-sidecar/compaction-sidecar/clients/go/compactionv1"
	"github.com/compaction-sidecar/compaction-sidecar/clients/go/internal/testserver"
)

type scenarioFile struct {
	Format     int        `json:"format"`
	ServerArgs []string   `json:"server_args"`
	Scenarios  []scenario `json:"scenarios"`
}

type scenario struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Steps       []step `json:"steps"`
}

type step struct {
	Call     string            `json:"call"`
	Request  json.RawMessage   `json:"request"`
	Requests []json.RawMessage `json:"requests"`
	Expect   map[string]any    `json:"expect"`
	// Capture names values of the response (dotted paths) that later
	// steps send and expect as ${name}.
	Capture map[string]string `json:"capture"`
	// PolicyDocument is a CreateSession's policy, read by PolicyFromJSON
	// as a user hands it a document.
	PolicyDocument json.RawMessage `json:"policy_document"`
}

// scenariosPath is $CONFORMANCE_SCENARIOS, else
// tests/conformance/scenarios.json, found from this file so that `go test`
// works from any directory.
func scenariosPath() string {
	if path := os.Getenv("CONFORMANCE_SCENARIOS"); path != "" {
		return path
	}
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..", "..", "tests", "conformance", "scenarios.json")
}

func load(t *testing.T) scenarioFile {
	t.Helper()
	raw, err := os.ReadFile(scenariosPath())
	if err != nil {
		t.Fatalf("read scenarios: %v", err)
	}
	var doc scenarioFile
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("parse scenarios: %v", err)
	}
	if doc.Format != 1 {
		t.Fatalf("scenarios.json: unsupported format %d", doc.Format)
	}
	if len(doc.Scenarios) == 0 {
		t.Fatal("scenarios.json holds no scenario")
	}
	return doc
}

// TestConformance replays every scenario, one subtest each, in file order,
// against one fresh server; a scenario stops at its first failing step.
func TestConformance(t *testing.T) {
	doc := load(t)
	server, err := testserver.Start("", doc.ServerArgs...)
	if err != nil {
		t.Fatalf("start compaction-sidecar: %v", err)
	}
	t.Cleanup(server.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	client, err := compaction.Dial(ctx, server.Addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = client.Close() })

	for _, sc := range doc.Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			values := map[string]string{}
			for i, written := range sc.Steps {
				st, err := substituteStep(written, values)
				if err != nil {
					t.Fatalf("step %d (%s): %v", i, written.Call, err)
				}
				out, err := run(client, st)
				if err != nil {
					t.Fatalf("step %d (%s): %v", i, st.Call, err)
				}
				expect := st.Expect
				if expect == nil {
					expect = map[string]any{"code": "OK"}
				}
				problems := Check(expect, out)
				if len(problems) == 0 && st.Capture != nil {
					var got map[string]string
					got, problems = Capture(st.Capture, out.Response)
					maps.Copy(values, got)
				}
				if len(problems) > 0 {
					t.Fatalf("step %d (%s) of %s\n  expected: %s\n  actual:   code=%s message=%q response=%s\n  %s",
						i, st.Call, sc.Name, show(expect), out.Code, out.Message, show(out.Response),
						strings.Join(problems, "\n  "))
				}
			}
		})
	}
}

// substituteStep is the step with every ${name} replaced by what an
// earlier step captured, in its requests and its expectations.
func substituteStep(st step, values map[string]string) (step, error) {
	out := st
	var err error
	if len(st.Request) > 0 {
		if out.Request, err = substituteJSON(st.Request, values); err != nil {
			return out, err
		}
	}
	out.Requests = make([]json.RawMessage, len(st.Requests))
	for i, r := range st.Requests {
		if out.Requests[i], err = substituteJSON(r, values); err != nil {
			return out, err
		}
	}
	if st.Expect != nil {
		expect, err := substitute(st.Expect, values)
		if err != nil {
			return out, err
		}
		out.Expect = expect.(map[string]any)
	}
	return out, nil
}

// run makes one step's call through the client's wrapper where it has one,
// else through the generated stub on the same connection, and returns its
// outcome. An error means the step itself is malformed.
func run(c *compaction.Client, st step) (Outcome, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if st.Call == "StreamEvents" {
		return stream(ctx, c, st.Requests)
	}
	var (
		resp proto.Message
		err  error
	)
	switch st.Call {
	case "CreateSession":
		req := &pb.CreateSessionRequest{}
		if err := parse(st.Request, req); err != nil {
			return Outcome{}, err
		}
		if len(st.PolicyDocument) > 0 {
			policy, perr := compaction.PolicyFromJSON(string(st.PolicyDocument))
			if perr != nil {
				return Outcome{Code: "INVALID_ARGUMENT", Message: perr.Error()}, nil
			}
			req.Policy = policy
		}
		resp, err = c.CreateSession(ctx, req.SessionId, req.Policy, req.Labels, compaction.WithModel(req.Model))
	case "GetSession":
		req := &pb.GetSessionRequest{}
		if err := parse(st.Request, req); err != nil {
			return Outcome{}, err
		}
		resp, err = c.Session(req.SessionId).Get(ctx)
	case "UpdateSession":
		req := &pb.UpdateSessionRequest{}
		if err := parse(st.Request, req); err != nil {
			return Outcome{}, err
		}
		resp, err = c.UpdateSession(ctx, req.Session, req.GetUpdateMask().GetPaths(), req.ExpectedVersion)
	case "DeleteSession":
		req := &pb.DeleteSessionRequest{}
		if err := parse(st.Request, req); err != nil {
			return Outcome{}, err
		}
		resp, err = &pb.DeleteSessionResponse{}, c.DeleteSession(ctx, req.SessionId)
	case "ListSessions":
		req := &pb.ListSessionsRequest{}
		if err := parse(st.Request, req); err != nil {
			return Outcome{}, err
		}
		resp, err = c.Stub().ListSessions(ctx, req) // one page, as the request asks
	case "AppendEvents":
		req := &pb.AppendEventsRequest{}
		if err := parse(st.Request, req); err != nil {
			return Outcome{}, err
		}
		resp, err = c.Session(req.SessionId).Append(ctx, req.Events, &compaction.AppendOptions{
			ExpectedVersion: req.ExpectedVersion, CreateIfMissing: req.CreateIfMissing,
			LabelUpdates: req.LabelUpdates, Usage: req.Usage,
		})
	case "GetContext":
		req := &pb.GetContextRequest{}
		if err := parse(st.Request, req); err != nil {
			return Outcome{}, err
		}
		resp, err = c.Session(req.SessionId).ContextAs(ctx, req.Format)
	case "Compact":
		req := &pb.CompactRequest{}
		if err := parse(st.Request, req); err != nil {
			return Outcome{}, err
		}
		var result *pb.CompactionResult
		result, err = c.Session(req.SessionId).Compact(ctx, &compaction.CompactOptions{
			Force: req.Force, Policy: req.Policy, ExpectedVersion: req.ExpectedVersion,
		})
		resp = &pb.CompactResponse{Result: result}
	case "ListEvents":
		req := &pb.ListEventsRequest{}
		if err := parse(st.Request, req); err != nil {
			return Outcome{}, err
		}
		if req.PageSize != 0 || req.PageToken != "" {
			resp, err = c.Stub().ListEvents(ctx, req) // one page, as the request asks
			break
		}
		page := &pb.ListEventsResponse{}
		for event, e := range c.Session(req.SessionId).Events(ctx, req.ActiveOnly) {
			if e != nil {
				err = e
				break
			}
			page.Events = append(page.Events, event)
		}
		resp = page
	case "SearchEvents":
		req := &pb.SearchEventsRequest{}
		if err := parse(st.Request, req); err != nil {
			return Outcome{}, err
		}
		if req.PageSize != 0 || req.PageToken != "" {
			resp, err = c.Stub().SearchEvents(ctx, req) // one page, as the request asks
			break
		}
		opts := &compaction.SearchOptions{
			SessionID: req.SessionId, Roles: req.Roles, IncludeActive: req.IncludeActive,
		}
		if req.Since != nil {
			opts.Since = req.Since.AsTime()
		}
		if req.Until != nil {
			opts.Until = req.Until.AsTime()
		}
		page := &pb.SearchEventsResponse{}
		for hit, e := range c.Search(ctx, req.Query, opts) {
			if e != nil {
				err = e
				break
			}
			page.Hits = append(page.Hits, hit)
		}
		resp = page
	case "RestoreCompaction":
		req := &pb.RestoreCompactionRequest{}
		if err := parse(st.Request, req); err != nil {
			return Outcome{}, err
		}
		var result *pb.CompactionResult
		result, err = c.Session(req.SessionId).Restore(ctx, req.CompactionId, &compaction.RestoreOptions{
			ExpectedVersion: req.ExpectedVersion, PauseAutoCompaction: req.PauseAutoCompaction,
		})
		resp = &pb.RestoreCompactionResponse{Result: result}
	case "ListCompactions":
		req := &pb.ListCompactionsRequest{}
		if err := parse(st.Request, req); err != nil {
			return Outcome{}, err
		}
		if req.PageSize != 0 || req.PageToken != "" {
			resp, err = c.Stub().ListCompactions(ctx, req) // one page, as the request asks
			break
		}
		page := &pb.ListCompactionsResponse{}
		for record, e := range c.Session(req.SessionId).Compactions(ctx, nil) {
			if e != nil {
				err = e
				break
			}
			page.Compactions = append(page.Compactions, record)
		}
		resp = page
	default:
		return Outcome{}, fmt.Errorf("unknown call %q", st.Call)
	}
	if err != nil {
		return failed(err), nil
	}
	decoded, err := decode(resp)
	return Outcome{Code: "OK", Response: decoded}, err
}

// stream sends every request on one StreamEvents call, half-closes, and
// reads every response until the server ends the call.
func stream(ctx context.Context, c *compaction.Client, raw []json.RawMessage) (Outcome, error) {
	requests := make([]*pb.StreamEventsRequest, len(raw))
	for i, r := range raw {
		requests[i] = &pb.StreamEventsRequest{}
		if err := parse(r, requests[i]); err != nil {
			return Outcome{}, err
		}
	}
	if len(requests) == 0 {
		return Outcome{}, errors.New("StreamEvents step without requests")
	}
	s, err := c.Session(requests[0].SessionId).Stream(ctx)
	if err != nil {
		return failed(err), nil
	}
	defer s.Close()
	for _, req := range requests {
		if err := s.SendRequest(req); err != nil && !errors.Is(err, io.EOF) {
			return failed(err), nil
		}
	}
	if err := s.CloseSend(); err != nil {
		return failed(err), nil
	}
	var responses []any
	for msg, err := range s.Messages() {
		if err != nil {
			return failed(err), nil
		}
		decoded, err := decode(rebuild(msg))
		if err != nil {
			return Outcome{}, err
		}
		responses = append(responses, decoded)
	}
	return Outcome{Code: "OK", Response: responses}, nil
}

// rebuild turns the wrapper's StreamMessage back into the wire message, to
// print it as the scenarios expect it.
func rebuild(msg *compaction.StreamMessage) *pb.StreamEventsResponse {
	resp := &pb.StreamEventsResponse{RequestId: msg.RequestID, SessionId: msg.SessionID}
	switch {
	case msg.Ack != nil:
		resp.Result = &pb.StreamEventsResponse_Append{Append: msg.Ack}
	case msg.Err != nil:
		resp.Result = &pb.StreamEventsResponse_Error{Error: msg.Err.GRPCStatus().Proto()}
	case msg.Compaction != nil:
		resp.Result = &pb.StreamEventsResponse_Compaction{Compaction: msg.Compaction}
	}
	return resp
}

func failed(err error) Outcome {
	var e *compaction.Error
	if !errors.As(err, &e) {
		st, ok := status.FromError(err)
		if !ok {
			return Outcome{Code: "UNKNOWN", Message: err.Error()}
		}
		e = compaction.StatusError(st.Proto()) // a call made on the raw stub, read as the client reads it
	}
	out := Outcome{Code: codeName(e.Code), Message: e.Message}
	for _, v := range e.FieldViolations {
		out.FieldViolations = append(out.FieldViolations, v.Field)
	}
	return out
}

func parse(raw json.RawMessage, m proto.Message) error {
	if len(raw) == 0 {
		return nil
	}
	if err := protojson.Unmarshal(raw, m); err != nil {
		return fmt.Errorf("request %s: %w", raw, err)
	}
	return nil
}

// decode prints a response with the standard proto3 JSON printer and reads
// it back as plain JSON values (numbers kept as json.Number).
func decode(m proto.Message) (any, error) {
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var v any
	return v, dec.Decode(&v)
}

// codeName is the canonical name of a status code ("INVALID_ARGUMENT").
func codeName(c codes.Code) string {
	names := map[codes.Code]string{
		codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN",
		codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
		codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
		codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
		codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED",
		codes.OutOfRange: "OUT_OF_RANGE", codes.Unimplemented: "UNIMPLEMENTED",
		codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE", codes.DataLoss: "DATA_LOSS",
		codes.Unauthenticated: "UNAUTHENTICATED",
	}
	if name, ok := names[c]; ok {
		return name
	}
	return c.String()
}
