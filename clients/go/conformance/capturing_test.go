package conformance

// Values captured from one step's response and used by later steps (see
// tests/conformance/README.md, "capture"): a compaction id or a page token
// the server assigned, sent and expected later as ${name}.

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

var captured = regexp.MustCompile(`\$\{(\w+)\}`)

// substituteText replaces every ${name} in s by its captured value; a name
// no earlier step captured is an error of the scenario.
func substituteText(s string, values map[string]string) (string, error) {
	var missing []string
	out := captured.ReplaceAllStringFunc(s, func(whole string) string {
		name := captured.FindStringSubmatch(whole)[1]
		value, ok := values[name]
		if !ok {
			missing = append(missing, whole)
		}
		return value
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%s was not captured by an earlier step", strings.Join(missing, ", "))
	}
	return out, nil
}

// substituteJSON is substituteText on raw JSON, each value escaped as the
// inside of a JSON string.
func substituteJSON(raw json.RawMessage, values map[string]string) (json.RawMessage, error) {
	escaped := make(map[string]string, len(values))
	for name, value := range values {
		quoted, _ := json.Marshal(value)
		escaped[name] = string(quoted[1 : len(quoted)-1])
	}
	out, err := substituteText(string(raw), escaped)
	return json.RawMessage(out), err
}

// substitute is substituteText on every string of a decoded JSON value.
func substitute(v any, values map[string]string) (any, error) {
	switch v := v.(type) {
	case string:
		return substituteText(v, values)
	case []any:
		out := make([]any, len(v))
		for i, item := range v {
			s, err := substitute(item, values)
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for key, item := range v {
			s, err := substitute(item, values)
			if err != nil {
				return nil, err
			}
			out[key] = s
		}
		return out, nil
	}
	return v, nil
}

// at is the value at a dotted path of a decoded response (numbers index
// arrays), and whether it is there.
func at(response any, path string) (any, bool) {
	value := response
	for _, key := range strings.Split(path, ".") {
		switch node := value.(type) {
		case map[string]any:
			var ok bool
			if value, ok = node[key]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(node) {
				return nil, false
			}
			value = node[i]
		default:
			return nil, false
		}
	}
	return value, true
}

// Capture returns the string values at paths (dotted keys; numbers index
// arrays) of a decoded response, and a problem for each one missing.
func Capture(paths map[string]string, response any) (map[string]string, []string) {
	values := map[string]string{}
	var problems []string
	for name, path := range paths {
		value, _ := at(response, path)
		if s, ok := value.(string); ok && s != "" {
			values[name] = s
		} else {
			problems = append(problems, fmt.Sprintf("capture %s: no string at %s of %s", name, path, show(response)))
		}
	}
	return values, problems
}
