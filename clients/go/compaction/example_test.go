package compaction_test

import (
	"context"
	"fmt"
	"log"

	"github.com/compaction-sidecar/compaction-sidecar/clients/go/compaction"
	pb "github.com/compaction-sidecar/compaction-sidecar/clients/go/compactionv1"
)

// The README's example, run against the test server.
func Example() {
	ctx := context.Background()
	client, err := compaction.Dial(ctx, sidecar.Addr) // add compaction.WithToken / WithTLS as needed
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	policy, _ := compaction.PolicyFromJSON(`{"trigger": {"turnCount": 20}, "strategy": {"slidingWindow": {"maxEvents": 40}}}`)
	if _, err := client.CreateSession(ctx, "chat-go", policy, map[string]string{"app": "demo"}); err != nil {
		log.Fatal(err)
	}
	chat := client.Session("chat-go")
	defer client.DeleteSession(ctx, "chat-go") // sessions outlive clients: this one is a demo

	stream, _ := chat.Stream(ctx)
	_, _ = stream.Send([]*pb.Event{compaction.User("Where is my order?")}, nil)
	_, _ = stream.Send([]*pb.Event{compaction.Assistant("It ships today.")}, nil)
	_ = stream.CloseSend()
	for msg, err := range stream.Messages() { // acks, per-request errors, background compactions
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("stored at version", msg.Ack.GetVersion())
	}

	window, _ := chat.Context(ctx) // what to send to the model
	fmt.Println(len(window.GetEvents()), "events in the context")
	for hit, err := range chat.Search(ctx, "order", &compaction.SearchOptions{IncludeActive: true}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("found:", hit.GetEvent().GetText())
	}
	// Output:
	// stored at version 2
	// stored at version 3
	// 2 events in the context
	// found: Where is my order?
}
