package conformance

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestCapturedValuesAreSubstitutedIntoLaterSteps(t *testing.T) {
	response := js(t, `{"result": {"compactionId": "c9"}, "compactions": [{"compactionId": "c8"}]}`)
	values, missing := Capture(map[string]string{"newer": "result.compactionId", "older": "compactions.0.compactionId"}, response)
	if want := map[string]string{"newer": "c9", "older": "c8"}; !reflect.DeepEqual(values, want) || len(missing) != 0 {
		t.Fatalf("Capture = %v, %v", values, missing)
	}
	request, err := substituteJSON(json.RawMessage(`{"compactionId": "${older}"}`), values)
	if err != nil || string(request) != `{"compactionId": "c8"}` {
		t.Fatalf("request = %s, %v", request, err)
	}
	expect, err := substitute(js(t, `{"message_contains": "${newer} is"}`), values)
	if err != nil || !reflect.DeepEqual(expect, map[string]any{"message_contains": "c9 is"}) {
		t.Fatalf("expect = %v, %v", expect, err)
	}
}

func TestACaptureThatFindsNothingFailsTheStep(t *testing.T) {
	_, missing := Capture(map[string]string{"token": "nextPageToken"}, js(t, `{"compactions": []}`))
	if len(missing) != 1 || !strings.Contains(missing[0], "capture token: no string at nextPageToken") {
		t.Fatalf("missing = %v", missing)
	}
	if _, err := substitute("${never}", nil); err == nil || !strings.Contains(err.Error(), "was not captured") {
		t.Fatalf("err = %v", err)
	}
}
