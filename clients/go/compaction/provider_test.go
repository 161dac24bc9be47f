package compaction_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/compaction-sidecar/compaction-sidecar/clients/go/compaction"
	pb "github.com/compaction-sidecar/compaction-sidecar/clients/go/compactionv1"
)

var (
	thought       = compaction.Reasoning("order 42 is in the lookup tool", []byte{0xfb, 0xff, 0xbf, 1, 2, 3})
	redacted      = compaction.RedactedReasoning([]byte{0, 1, 0xfe, 0xff})
	summary       = &pb.Reasoning{Text: "looked it up", Signature: []byte{0xfb, 0xef, 9}, Id: "rs_1"}
	callSignature = []byte{0xfa, 0xfb, 0xfc, 7}
)

// toolLoop is a user question, the assistant's reasoning and signed call,
// and the tool's answer.
func toolLoop(prefix string) []*pb.Event {
	return []*pb.Event{
		{Id: prefix + "u", Role: pb.Role_ROLE_USER, Text: "Where is order 42?"},
		{
			Id: prefix + "a", Role: pb.Role_ROLE_ASSISTANT, Text: "Let me look.",
			Reasoning: []*pb.Reasoning{thought, redacted, summary},
			ToolCalls: []*pb.ToolCall{{Id: "c1", Name: "lookup_order", ArgumentsJson: `{"order":42}`, Signature: callSignature}},
		},
		{Id: prefix + "t", Role: pb.Role_ROLE_TOOL, ToolResults: []*pb.ToolResult{{CallId: "c1", Name: "lookup_order", Content: "shipped"}}},
	}
}

// checkSigned fails unless events carry toolLoop's reasoning and call
// signatures byte for byte.
func checkSigned(t *testing.T, where string, events []*pb.Event) {
	t.Helper()
	want := toolLoop("")
	if len(events) != len(want) {
		t.Fatalf("%s: %d events, want %d", where, len(events), len(want))
	}
	for i, e := range events {
		if len(e.GetReasoning()) != len(want[i].GetReasoning()) {
			t.Fatalf("%s: event %s has %d reasoning blocks, want %d", where, e.GetId(), len(e.GetReasoning()), len(want[i].GetReasoning()))
		}
		for j, r := range e.GetReasoning() {
			if !proto.Equal(r, want[i].GetReasoning()[j]) {
				t.Fatalf("%s: event %s reasoning %d is %v, want %v", where, e.GetId(), j, r, want[i].GetReasoning()[j])
			}
		}
		for j, c := range e.GetToolCalls() {
			if !bytes.Equal(c.GetSignature(), want[i].GetToolCalls()[j].GetSignature()) {
				t.Fatalf("%s: call %s signature %x, want %x", where, c.GetId(), c.GetSignature(), callSignature)
			}
		}
	}
}

func TestReasoningAndCallSignaturesComeBackByteForByte(t *testing.T) {
	client, ctx := dial(t), ctxFor(t)
	chat := client.Session(uniqueID("go-reasoning"))
	ack, err := chat.Append(ctx, toolLoop("r"), &compaction.AppendOptions{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	checkSigned(t, "ack", ack.GetEvents())
	window, err := chat.Context(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkSigned(t, "context", window.GetEvents())
	var log []*pb.Event
	for e, err := range chat.Events(ctx, false) {
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, e)
	}
	checkSigned(t, "log", log)

	stream, err := client.Session(uniqueID("go-reasoning-stream")).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if _, err := stream.Send(toolLoop("s"), &compaction.SendOptions{CreateIfMissing: true}); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var acks []*pb.AppendEventsResponse
	for msg, err := range stream.Messages() {
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, msg.Ack)
	}
	if len(acks) != 1 || acks[0] == nil {
		t.Fatalf("stream answered %v, want one ack", acks)
	}
	checkSigned(t, "stream ack", acks[0].GetEvents())
}

// capture records every unary request of the named method and answers
// Aborted: what the wrapper put on the wire, whatever the server does.
type capture struct {
	mu   sync.Mutex
	seen []proto.Message
}

func (c *capture) interceptor(methods ...string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		for _, m := range methods {
			if strings.HasSuffix(method, "/"+m) {
				c.mu.Lock()
				c.seen = append(c.seen, proto.Clone(req.(proto.Message)))
				c.mu.Unlock()
				return status.Error(codes.Aborted, "captured")
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// recording is a client stream that records what it sends.
type recording struct {
	grpc.ClientStream
	into *capture
}

func (r recording) SendMsg(m any) error {
	r.into.mu.Lock()
	r.into.seen = append(r.into.seen, proto.Clone(m.(proto.Message)))
	r.into.mu.Unlock()
	return r.ClientStream.SendMsg(m)
}

func (c *capture) streams(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	return recording{s, c}, err
}

func TestAStreamedAppendCarriesItsUsage(t *testing.T) {
	ctx := ctxFor(t)
	var got capture
	client := dial(t, compaction.WithDialOptions(grpc.WithChainStreamInterceptor(got.streams)))
	stream, err := client.Session(uniqueID("go-stream-usage")).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	usage := &pb.ModelUsage{ContextVersion: 1, PromptTokens: 99}
	for _, opts := range []*compaction.SendOptions{{CreateIfMissing: true}, {Usage: usage}} {
		if _, err := stream.Send([]*pb.Event{compaction.User("hi")}, opts); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for _, err := range stream.Messages() {
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(got.seen) != 2 {
		t.Fatalf("sent %d requests, want 2", len(got.seen))
	}
	if u := got.seen[0].(*pb.StreamEventsRequest).GetUsage(); u != nil {
		t.Errorf("first request's usage %v, want none", u)
	}
	if u := got.seen[1].(*pb.StreamEventsRequest).GetUsage(); !proto.Equal(u, usage) {
		t.Errorf("second request's usage %v, want %v", u, usage)
	}
}

func TestRequestsCarryTheModelTheUsageAndTheFormat(t *testing.T) {
	ctx := ctxFor(t)
	var got capture
	client := dial(t, compaction.WithDialOptions(grpc.WithChainUnaryInterceptor(
		got.interceptor("CreateSession", "UpdateSession", "AppendEvents", "GetContext"))))
	usage := &pb.ModelUsage{ContextVersion: 7, PromptTokens: 1234}
	chat := client.Session("captured")
	_, _ = client.CreateSession(ctx, "captured", nil, nil, compaction.WithModel("gemini-2.5-flash"))
	_, _ = client.UpdateSession(ctx, &pb.Session{SessionId: "captured", Model: "gpt-5"}, []string{"model"}, 2)
	_, _ = chat.Append(ctx, []*pb.Event{compaction.User("hi")}, &compaction.AppendOptions{Usage: usage})
	_, _ = chat.ContextAs(ctx, pb.ContextFormat_CONTEXT_FORMAT_ANTHROPIC)
	_, _ = chat.Context(ctx)

	if len(got.seen) != 5 {
		t.Fatalf("captured %d requests, want 5", len(got.seen))
	}
	if m := got.seen[0].(*pb.CreateSessionRequest).GetModel(); m != "gemini-2.5-flash" {
		t.Errorf("CreateSession model %q", m)
	}
	update := got.seen[1].(*pb.UpdateSessionRequest)
	if update.GetSession().GetModel() != "gpt-5" || !slices.Equal(update.GetUpdateMask().GetPaths(), []string{"model"}) {
		t.Errorf("UpdateSession %v", update)
	}
	if u := got.seen[2].(*pb.AppendEventsRequest).GetUsage(); !proto.Equal(u, usage) {
		t.Errorf("AppendEvents usage %v, want %v", u, usage)
	}
	if f := got.seen[3].(*pb.GetContextRequest).GetFormat(); f != pb.ContextFormat_CONTEXT_FORMAT_ANTHROPIC {
		t.Errorf("ContextAs format %v", f)
	}
	if f := got.seen[4].(*pb.GetContextRequest).GetFormat(); f != pb.ContextFormat_CONTEXT_FORMAT_UNSPECIFIED {
		t.Errorf("Context format %v", f)
	}
}

// A window too large for one answer comes without content and without its
// rendering: ContextAs reads the events in pages, reasoning and signatures
// kept, and leaves RenderedJson empty.
func TestContextAsReadsAnOmittedWindowAsEventsOnly(t *testing.T) {
	client, _ := dialSmallLimit(t)
	ctx := ctxFor(t)
	var big []*pb.Event
	for _, id := range []string{"q0", "q1", "q2", "q3"} {
		big = append(big, &pb.Event{Id: id, Role: pb.Role_ROLE_USER, Text: id + strings.Repeat("x", 1500)})
	}
	chat := client.Session("big")
	if _, err := chat.Append(ctx, big, &compaction.AppendOptions{CreateIfMissing: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := chat.Append(ctx, toolLoop("r"), nil); err != nil {
		t.Fatal(err)
	}
	gemini := pb.ContextFormat_CONTEXT_FORMAT_GEMINI
	answer, err := client.Stub().GetContext(ctx, &pb.GetContextRequest{SessionId: "big", Format: gemini})
	if err != nil {
		t.Fatal(err)
	}
	window, err := chat.ContextAs(ctx, gemini)
	if err != nil {
		t.Fatal(err)
	}
	if !answer.GetContentOmitted() {
		t.Fatal("the window fits one answer: the test reads nothing in parts")
	}
	if got, want := ids(window.GetEvents()), []string{"q0", "q1", "q2", "q3", "ru", "ra", "rt"}; !slices.Equal(got, want) {
		t.Fatalf("window %v, want %v", got, want)
	}
	checkSigned(t, "window read in parts", window.GetEvents()[4:])
	if window.GetRenderedJson() != "" || window.GetContentOmitted() {
		t.Fatalf("renderedJson %q, contentOmitted %v: want events only", window.GetRenderedJson(), window.GetContentOmitted())
	}
	if window.GetEstimatedPromptTokens() != answer.GetEstimatedPromptTokens() {
		t.Fatalf("estimatedPromptTokens %d, want the answer's %d", window.GetEstimatedPromptTokens(), answer.GetEstimatedPromptTokens())
	}
}

// A session with a model carries its profile; a usage report calibrates it,
// and the calibrated estimate and a rendering come with its context.
func TestASessionsModelProfileCalibrationAndRenderedContext(t *testing.T) {
	client, ctx := dial(t), ctxFor(t)
	id := uniqueID("go-model")
	created, err := client.CreateSession(ctx, id, nil, nil, compaction.WithModel("gemini-2.5-flash"))
	if err != nil {
		t.Fatal(err)
	}
	if p := created.GetModelProfile(); p.GetProvider() != "gemini" || p.GetInputWindowTokens() != 1048576 || p.GetMaxOutputTokens() != 65536 {
		t.Fatalf("profile %v", p)
	}
	chat := client.Session(id)
	appended, err := chat.Append(ctx, []*pb.Event{compaction.User("Where is order 42?")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !appended.GetEvents()[0].GetTokenCountEstimated() {
		t.Fatal("an append's count should be an estimate until a decision needs it")
	}
	// A forced pass plans on exact counts, so the window read next is counted exactly.
	if _, err := chat.Compact(ctx, &compaction.CompactOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	sent, err := chat.Context(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sent.GetTokenCountEstimated() {
		t.Fatal("the window read after a pass should be exact")
	}
	usage := &pb.ModelUsage{ContextVersion: sent.GetVersion(), PromptTokens: 2 * int64(sent.GetTokenCount())}
	counted, err := chat.Append(ctx, []*pb.Event{compaction.User("and 43?")}, &compaction.AppendOptions{Usage: usage})
	if err != nil {
		t.Fatal(err)
	}
	if counted.GetUsageIgnoredReason() != "" {
		t.Fatalf("usage ignored: %s", counted.GetUsageIgnoredReason())
	}
	header, err := chat.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := header.GetCalibration(); c.GetFactor() != 2 || c.GetSamples() != 1 {
		t.Fatalf("calibration %v, want factor 2 after one report", c)
	}
	window, err := chat.ContextAs(ctx, pb.ContextFormat_CONTEXT_FORMAT_OPENAI_CHAT)
	if err != nil {
		t.Fatal(err)
	}
	if window.GetEstimatedPromptTokens() != 2*window.GetTokenCount() {
		t.Fatalf("estimated %d for %d tokens at factor 2", window.GetEstimatedPromptTokens(), window.GetTokenCount())
	}
	var rendered struct {
		Messages []struct{ Role, Content string } `json:"messages"`
	}
	if err := json.Unmarshal([]byte(window.GetRenderedJson()), &rendered); err != nil {
		t.Fatalf("renderedJson %q: %v", window.GetRenderedJson(), err)
	}
	if len(rendered.Messages) != 2 || rendered.Messages[1].Content != "and 43?" {
		t.Fatalf("rendered %+v", rendered)
	}
	ignored, err := chat.Append(ctx, []*pb.Event{compaction.User("thanks")}, &compaction.AppendOptions{
		Usage: &pb.ModelUsage{ContextVersion: 999, PromptTokens: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ignored.GetUsageIgnoredReason(), "999") {
		t.Fatalf("usageIgnoredReason %q", ignored.GetUsageIgnoredReason())
	}
	renamed, err := client.UpdateSession(ctx, &pb.Session{SessionId: id, Model: "claude-sonnet-4-5"}, []string{"model"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if renamed.GetModelProfile().GetProvider() != "anthropic" {
		t.Fatalf("profile after the update %v", renamed.GetModelProfile())
	}
	_, err = client.CreateSession(ctx, uniqueID("go-model-2"), nil, nil, compaction.WithModel("no-such-model"))
	var e *compaction.Error
	if !errors.As(err, &e) || e.Code != codes.InvalidArgument || e.Field() != "model" {
		t.Fatalf("unknown model: %v", err)
	}
}
