package compaction

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/compaction-sidecar/compaction-sidecar/clients/go/compactionv1"
)

// WithIDs returns the events with every empty id replaced by a random one
// (32 hex digits); events that have an id are returned as they are, and the
// caller's events are never modified.
//
// Give a batch its ids before sending it to be able to re-send it safely:
// after an Unavailable error, or on a new stream after a broken one, the
// server answers a re-sent id with the event it stored.
func WithIDs(events []*pb.Event) []*pb.Event {
	out := make([]*pb.Event, len(events))
	for i, e := range events {
		if e.GetId() != "" {
			out[i] = e
			continue
		}
		withID := &pb.Event{}
		if e != nil {
			withID = proto.CloneOf(e)
		}
		withID.Id = newID()
		out[i] = withID
	}
	return out
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// User is a USER event with this text: it starts a turn.
func User(text string) *pb.Event { return &pb.Event{Role: pb.Role_ROLE_USER, Text: text} }

// Assistant is an ASSISTANT event with this text.
func Assistant(text string) *pb.Event { return &pb.Event{Role: pb.Role_ROLE_ASSISTANT, Text: text} }

// System is a SYSTEM event (instructions) with this text.
func System(text string) *pb.Event { return &pb.Event{Role: pb.Role_ROLE_SYSTEM, Text: text} }

// Reasoning is a block of the model's reasoning as its provider returned
// it (Gemini's thought and thought_signature, Anthropic's thinking and
// signature), for an ASSISTANT event's Reasoning; the server keeps the
// signature byte for byte, as providers require it back unchanged.
func Reasoning(text string, signature []byte) *pb.Reasoning {
	return &pb.Reasoning{Text: text, Signature: signature}
}

// RedactedReasoning is reasoning the provider returned encrypted only
// (Anthropic's redacted_thinking): data is kept as its signature.
func RedactedReasoning(data []byte) *pb.Reasoning {
	return &pb.Reasoning{Signature: data, Redacted: true}
}

// PolicyFromJSON parses a compaction policy from its proto3 JSON form, e.g.
//
//	{"trigger": {"turnCount": 20}, "strategy": {"slidingWindow": {"maxEvents": 20}}}
//
// (snake_case names are accepted too), which reads better than the nested
// oneof wrappers of the generated types.
func PolicyFromJSON(s string) (*pb.CompactionPolicy, error) {
	policy := &pb.CompactionPolicy{}
	if err := protojson.Unmarshal([]byte(s), policy); err != nil {
		return nil, fmt.Errorf("compaction: policy: %w", err)
	}
	return policy, nil
}
