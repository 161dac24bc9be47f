// Package conformance replays tests/conformance/scenarios.json through the
// Go client against a real compaction-sidecar (see conformance_test.go).
// This file holds the matching rules of tests/conformance/README.md, the
// same as the Python runner's (tests/conformance/runner.py).
package conformance

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Outcome is what a step produced: the status code name, its message, the
// field violations of a google.rpc.BadRequest, and the response as decoded
// proto3 JSON.
type Outcome struct {
	Code            string
	Message         string
	FieldViolations []string
	Response        any
}

// Check lists every way outcome misses expect; empty when the step passes.
// A wrong code is reported alone: the other checks would only add noise.
func Check(expect map[string]any, out Outcome) []string {
	var problems []string
	wantCode := "OK"
	if c, ok := expect["code"].(string); ok {
		wantCode = c
	}
	if out.Code != wantCode {
		return []string{fmt.Sprintf("code: expected %s, got %s (%s)", wantCode, out.Code, out.Message)}
	}
	if want, ok := expect["message_contains"].(string); ok && !strings.Contains(out.Message, want) {
		problems = append(problems, fmt.Sprintf("message: expected to contain %q, got %q", want, out.Message))
	}
	if want, ok := expect["field_violations"]; ok {
		problems = append(problems, Match(want, stringsToAny(out.FieldViolations), "field_violations")...)
	}
	if out.Code != "OK" {
		return problems
	}
	if want, ok := expect["response"]; ok {
		problems = append(problems, Match(want, out.Response, "response")...)
	}
	if want, ok := expect["responses"]; ok {
		problems = append(problems, Match(want, out.Response, "responses")...)
	}
	response, _ := out.Response.(map[string]any)
	if response == nil {
		return problems
	}
	events := objects(response["events"])
	if want, ok := expect["event_ids"]; ok {
		problems = append(problems, Match(want, ids(events), "event_ids")...)
	}
	if want, ok := expect["archived_ids"]; ok {
		var archived []map[string]any
		for _, e := range events {
			if e["archived"] == true {
				archived = append(archived, e)
			}
		}
		problems = append(problems, Match(want, ids(archived), "archived_ids")...)
	}
	if want, ok := expect["hit_event_ids"]; ok {
		var hitEvents []map[string]any
		for _, h := range objects(response["hits"]) {
			e, _ := h["event"].(map[string]any)
			hitEvents = append(hitEvents, e)
		}
		problems = append(problems, Match(want, ids(hitEvents), "hit_event_ids")...)
	}
	if want, ok := expect["rendered"]; ok {
		problems = append(problems, rendered(want, response["renderedJson"])...)
	}
	if want, ok := expect["differs"].(map[string]any); ok {
		problems = append(problems, differs(want, response)...)
	}
	return problems
}

// differs checks that the value at each dotted path is present and matches
// none of its listed values: how a scenario pins that an id moved (a cache
// prefix id after a compaction) without knowing either value.
func differs(want map[string]any, response any) []string {
	var problems []string
	for path, listed := range want {
		values, isList := listed.([]any)
		actual, present := at(response, path)
		switch {
		case !isList:
			problems = append(problems, fmt.Sprintf("differs %s: expected a list of values, got %s", path, show(listed)))
		case !present:
			problems = append(problems, fmt.Sprintf("differs %s: absent from %s", path, show(response)))
		default:
			for _, v := range values {
				if len(Match(v, actual, path)) == 0 {
					problems = append(problems, fmt.Sprintf("differs %s: expected other than %s, got %s", path, show(v), show(actual)))
				}
			}
		}
	}
	return problems
}

// rendered matches want, under the same rules, against the parsed
// renderedJson of the response.
func rendered(want, renderedJSON any) []string {
	text, _ := renderedJSON.(string)
	if text == "" {
		return []string{"rendered: the response has no renderedJson"}
	}
	var parsed any
	if err := json.Unmarshal([]byte(text), &parsed); err != nil {
		return []string{fmt.Sprintf("rendered: renderedJson is not JSON (%v): %q", err, text)}
	}
	return Match(want, parsed, "rendered")
}

// Match lists where actual differs from expected under the subset rules:
// objects match on the expected keys only, arrays element-wise with equal
// length, "*" matches anything present, numbers and numeric strings by
// value, and a key absent from actual matches an expected default.
func Match(expected, actual any, path string) []string {
	if expected == "*" {
		return nil
	}
	switch want := expected.(type) {
	case map[string]any:
		got, ok := actual.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: expected an object, got %s", path, show(actual))}
		}
		var problems []string
		for key, w := range want {
			a, present := got[key]
			if !present {
				if !isDefault(w) {
					problems = append(problems, fmt.Sprintf("%s.%s: missing, expected %s", path, key, show(w)))
				}
				continue
			}
			problems = append(problems, Match(w, a, path+"."+key)...)
		}
		return problems
	case []any:
		got, ok := actual.([]any)
		if !ok || len(got) != len(want) {
			return []string{fmt.Sprintf("%s: expected %s, got %s", path, show(expected), show(actual))}
		}
		var problems []string
		for i := range want {
			problems = append(problems, Match(want[i], got[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return problems
	}
	if x, ok := number(expected); ok {
		if y, ok := number(actual); ok && x == y {
			return nil
		}
	} else if expected == actual {
		return nil
	}
	return []string{fmt.Sprintf("%s: expected %s, got %s", path, show(expected), show(actual))}
}

// number is the value of a JSON number or numeric string (not a bool).
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case string:
		if strings.TrimSpace(n) == "" {
			return 0, false
		}
		f, err := strconv.ParseFloat(n, 64)
		return f, err == nil
	}
	return 0, false
}

func isDefault(v any) bool {
	switch d := v.(type) {
	case []any:
		return len(d) == 0
	case map[string]any:
		return len(d) == 0
	}
	if n, ok := number(v); ok {
		return n == 0
	}
	return v == false || v == ""
}

func objects(v any) []map[string]any {
	list, _ := v.([]any)
	out := make([]map[string]any, 0, len(list))
	for _, item := range list {
		m, _ := item.(map[string]any)
		out = append(out, m)
	}
	return out
}

func ids(events []map[string]any) []any {
	out := make([]any, 0, len(events))
	for _, e := range events {
		id, _ := e["id"].(string)
		out = append(out, id)
	}
	return out
}

func stringsToAny(s []string) []any {
	out := make([]any, 0, len(s))
	for _, v := range s {
		out = append(out, v)
	}
	return out
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}
