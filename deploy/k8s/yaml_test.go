package k8s_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// yaml11Bools are the plain scalars that YAML 1.1 reads as booleans besides
// true and false. kubectl reads manifests as YAML 1.1 (sigs.k8s.io/yaml, on
// go-yaml v2), where "value: yes" is a boolean that a string field refuses;
// gopkg.in/yaml.v3 reads YAML 1.2, where it is the string "yes".
var yaml11Bools = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true,
	"on": true, "On": true, "ON": true,
	"n": false, "N": false, "no": false, "No": false, "NO": false,
	"off": false, "Off": false, "OFF": false,
}

// yamlToJSON converts one YAML document to JSON as kubectl's strict reader
// (sigs.k8s.io/yaml's YAMLToJSONStrict) converts it: scalars typed as YAML
// 1.1 types them, timestamps left as strings, keys written as strings, and a
// key set twice in one mapping an error. A document of comments alone is
// null. Anchors, aliases, merge keys (<<), tags other than the core ones and
// a second document are refused: the manifests use none of them.
func yamlToJSON(doc []byte) ([]byte, error) {
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	var n yaml.Node
	if err := dec.Decode(&n); errors.Is(err, io.EOF) {
		return []byte("null"), nil
	} else if err != nil {
		return nil, err
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, fmt.Errorf("line %d: a second document", next.Line)
	case !errors.Is(err, io.EOF):
		return nil, err
	}
	v, err := jsonValue(&n)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// jsonValue is the JSON value of YAML node n.
func jsonValue(n *yaml.Node) (any, error) {
	if n.Anchor != "" {
		return nil, fmt.Errorf("line %d: anchor &%s: anchors and aliases are beyond this test", n.Line, n.Anchor)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return jsonValue(n.Content[0])
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		lines := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Anchor != "" {
				return nil, fmt.Errorf("line %d: a key that is not a plain value", k.Line)
			}
			if k.ShortTag() == "!!merge" {
				return nil, fmt.Errorf("line %d: merge keys (<<) are beyond this test", k.Line)
			}
			kv, err := scalarValue(k)
			if err != nil {
				return nil, err
			}
			key, err := keyString(kv)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", k.Line, err)
			}
			if line, ok := lines[key]; ok {
				return nil, fmt.Errorf("line %d: key %q already set in map at line %d", k.Line, key, line)
			}
			lines[key] = k.Line
			if m[key], err = jsonValue(v); err != nil {
				return nil, err
			}
		}
		return m, nil
	case yaml.SequenceNode:
		list := make([]any, len(n.Content))
		for i, e := range n.Content {
			var err error
			if list[i], err = jsonValue(e); err != nil {
				return nil, err
			}
		}
		return list, nil
	case yaml.ScalarNode:
		return scalarValue(n)
	case yaml.AliasNode:
		return nil, fmt.Errorf("line %d: alias *%s: anchors and aliases are beyond this test", n.Line, n.Value)
	}
	return nil, fmt.Errorf("line %d: unexpected YAML node kind %d", n.Line, n.Kind)
}

// scalarValue is the value of scalar n as YAML 1.1 types it: a string,
// nil, a bool, an integer or a float.
func scalarValue(n *yaml.Node) (any, error) {
	if n.Style == 0 { // plain, no explicit tag
		if b, ok := yaml11Bools[n.Value]; ok {
			return b, nil
		}
	}
	switch n.ShortTag() {
	case "!!str", "!!timestamp":
		// go-yaml v2 leaves a timestamp a string when it decodes into
		// an interface, as kubectl's reader does.
		return n.Value, nil
	case "!!null":
		return nil, nil
	case "!!bool", "!!int", "!!float":
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, err
		}
		return v, nil
	}
	return nil, fmt.Errorf("line %d: tag %s is beyond this test", n.Line, n.Tag)
}

// keyString writes a mapping key as sigs.k8s.io/yaml writes it into JSON.
func keyString(k any) (string, error) {
	switch k := k.(type) {
	case string:
		return k, nil
	case int:
		return strconv.Itoa(k), nil
	case int64:
		return strconv.FormatInt(k, 10), nil
	case float64:
		switch {
		case math.IsInf(k, 1):
			return ".inf", nil
		case math.IsInf(k, -1):
			return "-.inf", nil
		case math.IsNaN(k):
			return ".nan", nil
		}
		return strconv.FormatFloat(k, 'g', -1, 32), nil
	case bool:
		return strconv.FormatBool(k), nil
	}
	return "", fmt.Errorf("unsupported map key %v of type %T", k, k)
}

// TestYAMLToJSON proves that YAML converts to JSON as kubectl's strict
// reader converts it, and that what this test does not read is refused.
func TestYAMLToJSON(t *testing.T) {
	for _, tc := range []struct{ name, yaml, json, err string }{
		{name: "YAML 1.1 booleans", yaml: "a: yes\nb: Off\nc: y\nd: true\n", json: `{"a":true,"b":false,"c":true,"d":true}`},
		{name: "quoted and tagged strings", yaml: "a: \"yes\"\nb: 'on'\nc: !!str n\nd: |\n  no\n", json: `{"a":"yes","b":"on","c":"n","d":"no\n"}`},
		{name: "numbers", yaml: "mode: 0440\nhex: 0x1f\nport: 9477\nratio: 0.5\nquoted: \"9477\"\n", json: `{"hex":31,"mode":288,"port":9477,"quoted":"9477","ratio":0.5}`},
		{name: "nulls", yaml: "a: ~\nb: null\nc:\n", json: `{"a":null,"b":null,"c":null}`},
		{name: "a timestamp stays a string", yaml: "at: 2001-12-14\n", json: `{"at":"2001-12-14"}`},
		{name: "keys written as strings", yaml: "1: a\n1.5: b\non: c\n", json: `{"1":"a","1.5":"b","true":"c"}`},
		{name: "nested", yaml: "a: [1, {b: c}]\n", json: `{"a":[1,{"b":"c"}]}`},
		{name: "comments alone", yaml: "# nothing\n", json: `null`},
		{name: "a duplicate key", yaml: "a: 1\nb: 2\na: 3\n", err: `line 3: key "a" already set in map at line 1`},
		{name: "keys that collide as strings", yaml: "1: a\n\"1\": b\n", err: `key "1" already set`},
		{name: "an alias", yaml: "a: &x 1\nb: *x\n", err: "anchors and aliases are beyond this test"},
		{name: "a merge key", yaml: "a: {b: 1}\nc:\n  <<: {b: 1}\n", err: "merge keys (<<) are beyond this test"},
		{name: "a binary value", yaml: "a: !!binary aGk=\n", err: "tag !!binary is beyond this test"},
		{name: "a second document", yaml: "a: 1\n---\nb: 2\n", err: "a second document"},
		{name: "malformed", yaml: "a: [1\n", err: "yaml:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := yamlToJSON([]byte(tc.yaml))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %s, error %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.json {
				t.Fatalf("got %s, want %s", got, tc.json)
			}
		})
	}
}
