package conformance

import (
	"encoding/json"
	"strings"
	"testing"
)

func js(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMatchRules(t *testing.T) {
	cases := []struct {
		name, expected, actual string
		ok                     bool
	}{
		{"extra actual keys are fine", `{"a": 1}`, `{"a": 1, "b": 2}`, true},
		{"numeric string equals number", `{"version": "2"}`, `{"version": 2}`, true},
		{"number equals numeric string", `{"version": 2}`, `{"version": "2.0"}`, true},
		{"different numbers differ", `{"version": "2"}`, `{"version": "3"}`, false},
		{"star matches anything present", `{"id": "*"}`, `{"id": "x9"}`, true},
		{"star inside arrays", `["*", "b"]`, `["a", "b"]`, true},
		{"arrays need equal length", `["a"]`, `["a", "b"]`, false},
		{"arrays match element-wise", `["a", "b"]`, `["b", "a"]`, false},
		{"absent key matches false", `{"compacted": false}`, `{}`, true},
		{"absent key matches zero string", `{"totalEventCount": "0"}`, `{}`, true},
		{"absent key matches empty list and object", `{"events": [], "labels": {}}`, `{}`, true},
		{"absent key does not match a value", `{"compacted": true}`, `{}`, false},
		{"nested objects are subsets too", `{"result": {"compacted": true}}`, `{"result": {"compacted": true, "version": "4"}}`, true},
		{"bool is not a number", `{"x": true}`, `{"x": 1}`, false},
		{"object against scalar", `{"x": {"y": 1}}`, `{"x": 3}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			problems := Match(js(t, c.expected), js(t, c.actual), "$")
			if (len(problems) == 0) != c.ok {
				t.Fatalf("Match(%s, %s) = %v, want ok=%v", c.expected, c.actual, problems, c.ok)
			}
		})
	}
}

func TestCheckStopsAtTheCode(t *testing.T) {
	problems := Check(map[string]any{"code": "NOT_FOUND", "message_contains": "x"}, Outcome{Code: "OK"})
	if len(problems) != 1 || !strings.Contains(problems[0], "expected NOT_FOUND, got OK") {
		t.Fatalf("problems = %v", problems)
	}
}

func TestCheckEventIdsArchivedIdsAndHits(t *testing.T) {
	out := Outcome{Code: "OK", Response: js(t, `{
		"events": [{"id": "u1", "archived": true}, {"id": "a1"}, {"id": "sum-9", "synthetic": true}],
		"hits": [{"event": {"id": "u1"}}]}`)}
	expect := js(t, `{"event_ids": ["u1", "a1", "*"], "archived_ids": ["u1"], "hit_event_ids": ["u1"]}`).(map[string]any)
	if problems := Check(expect, out); len(problems) != 0 {
		t.Fatalf("problems = %v", problems)
	}
	expect = js(t, `{"archived_ids": ["a1"]}`).(map[string]any)
	if problems := Check(expect, out); len(problems) != 1 {
		t.Fatalf("problems = %v, want one", problems)
	}
}

func TestCheckFieldViolationsOnAFailedStep(t *testing.T) {
	out := Outcome{Code: "INVALID_ARGUMENT", Message: "events[1].role: required", FieldViolations: []string{"events[1].role"}}
	expect := js(t, `{"code": "INVALID_ARGUMENT", "message_contains": "events[1].role", "field_violations": ["events[1].role"]}`).(map[string]any)
	if problems := Check(expect, out); len(problems) != 0 {
		t.Fatalf("problems = %v", problems)
	}
	expect["field_violations"] = []any{"events[0].role"}
	if problems := Check(expect, out); len(problems) != 1 {
		t.Fatalf("problems = %v, want one", problems)
	}
}

func TestCheckRenderedAgainstTheParsedRendering(t *testing.T) {
	out := Outcome{Code: "OK", Response: js(t, `{"renderedJson": "{\"messages\":[{\"role\":\"user\"}]}"}`)}
	if problems := Check(js(t, `{"rendered": {"messages": [{"role": "user"}]}}`).(map[string]any), out); len(problems) != 0 {
		t.Fatalf("problems = %v", problems)
	}
	if problems := Check(js(t, `{"rendered": {"messages": [{"role": "system"}]}}`).(map[string]any), out); len(problems) != 1 {
		t.Fatalf("problems = %v, want one", problems)
	}
	empty := Outcome{Code: "OK", Response: js(t, `{}`)}
	if problems := Check(js(t, `{"rendered": {}}`).(map[string]any), empty); len(problems) != 1 {
		t.Fatalf("problems = %v, want one: no renderedJson", problems)
	}
}

func TestDiffersFailsWhenTheValueMatchesOneListed(t *testing.T) {
	out := Outcome{Code: "OK", Response: js(t, `{"cachePrefixId": "p2", "stablePrefixEvents": 2}`)}
	cases := []struct{ expect, problem string }{
		{`{"differs": {"cachePrefixId": ["p0", "p1"]}}`, ""},
		{`{"differs": {"cachePrefixId": ["p1", "p2"]}}`, `differs cachePrefixId: expected other than "p2", got "p2"`},
		{`{"differs": {"stablePrefixEvents": ["2"]}}`, `differs stablePrefixEvents: expected other than "2", got 2`},
		{`{"differs": {"missing": ["p1"]}}`, `differs missing: absent from`},
		{`{"differs": {"cachePrefixId": "p1"}}`, `differs cachePrefixId: expected a list of values, got "p1"`},
	}
	for _, c := range cases {
		problems := Check(js(t, c.expect).(map[string]any), out)
		if c.problem == "" && len(problems) != 0 || c.problem != "" && (len(problems) != 1 || !strings.Contains(problems[0], c.problem)) {
			t.Errorf("Check(%s) = %v, want %q", c.expect, problems, c.problem)
		}
	}
}
