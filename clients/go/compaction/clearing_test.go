package compaction_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/compaction-sidecar/compaction-sidecar/clients/go/compaction"
	pb "github.com/compaction-sidecar/compaction-sidecar/clients/go/compactionv1"
)

// A pipeline of clear_tool_results then token_budget, built from the generated
// types: the context shows placeholders (Cleared set), the log the originals.
func TestClearToolResultsShowsPlaceholdersAndKeepsOriginals(t *testing.T) {
	id := uniqueID("go-clear-1")
	client, ctx := dial(t), ctxFor(t)
	keep := int32(1)
	budget := int32(10000)
	policy := &pb.CompactionPolicy{Strategy: &pb.Strategy{Kind: &pb.Strategy_Pipeline{Pipeline: &pb.Pipeline{
		Steps: []*pb.Strategy{
			{Kind: &pb.Strategy_ClearToolResults{ClearToolResults: &pb.ClearToolResults{KeepToolUses: &keep}}},
			{Kind: &pb.Strategy_TokenBudget{TokenBudget: &pb.TokenBudget{MaxTokens: &budget}}},
		},
	}}}}
	if _, err := client.CreateSession(ctx, id, policy, nil); err != nil {
		t.Fatal(err)
	}
	page := strings.Repeat("pod checkout-7f9 OOMKilled, memory limit 512Mi exceeded while building invoices. ", 4)
	events := []*pb.Event{{Id: "u1", Role: pb.Role_ROLE_USER, Text: "why is checkout down?"}}
	for _, n := range []string{"1", "2", "3"} {
		events = append(events,
			&pb.Event{Id: "a" + n, Role: pb.Role_ROLE_ASSISTANT, ToolCalls: []*pb.ToolCall{{Id: "c" + n, Name: "kubectl", ArgumentsJson: "{}"}}},
			&pb.Event{Id: "t" + n, Role: pb.Role_ROLE_TOOL, ToolResults: []*pb.ToolResult{{CallId: "c" + n, Name: "kubectl", Content: page}}},
		)
	}
	chat := client.Session(id)
	if _, err := chat.Append(ctx, events, nil); err != nil {
		t.Fatal(err)
	}
	result, err := chat.Compact(ctx, &compaction.CompactOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if result.GetStrategy() != "pipeline" || !slices.Equal(result.GetClearedEventIds(), []string{"t1", "t2"}) {
		t.Fatalf("compaction %q cleared %v, want pipeline clearing [t1 t2]", result.GetStrategy(), result.GetClearedEventIds())
	}
	window, err := chat.Context(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var cleared []string
	for _, e := range window.GetEvents() {
		if e.GetCleared() {
			cleared = append(cleared, e.GetId())
		}
	}
	if !slices.Equal(cleared, []string{"t1", "t2"}) {
		t.Fatalf("cleared in the context: %v, want [t1 t2]", cleared)
	}
	if strings.Contains(window.GetEvents()[2].GetToolResults()[0].GetContent(), "building invoices") {
		t.Fatal("the context shows a cleared result's original content")
	}
	log := collect(t, chat.Events(ctx, false))
	if !log[2].GetCleared() || log[2].GetToolResults()[0].GetContent() != page {
		t.Fatalf("the log's t1 is %v, want the original content, cleared set", log[2])
	}
}
