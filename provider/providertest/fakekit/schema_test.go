package fakekit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// fanOutSchema is a schema of depth definitions, each an object with
// width required properties that all refer to the next definition, the
// last a string: an instance with every property has width^depth strings.
func fanOutSchema(width, depth int) json.RawMessage {
	defs := map[string]any{fmt.Sprintf("d%d", depth): map[string]any{"type": "string"}}
	for i := range depth {
		props, req := map[string]any{}, []string{}
		for p := range width {
			name := fmt.Sprintf("p%d", p)
			props[name] = map[string]any{"$ref": fmt.Sprintf("#/$defs/d%d", i+1)}
			req = append(req, name)
		}
		defs[fmt.Sprintf("d%d", i)] = map[string]any{"type": "object", "properties": props, "required": req, "additionalProperties": false}
	}
	b, _ := json.Marshal(map[string]any{"$ref": "#/$defs/d0", "$defs": defs})
	return b
}

// valid reports whether instance matches schema.
func valid(t *testing.T, schema, instance json.RawMessage) error {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(instance))
	if err != nil {
		t.Fatalf("the instance is not JSON: %v", err)
	}
	return sch.Validate(v)
}

// A schema whose $ref fan-out makes every full instance huge (4 properties
// a level, 10 levels: 4^10 = 1,048,576 strings, about 10 MB) gets an
// answer of at most MaxInstanceValues values; a small fan-out is answered
// whole and matches its schema.
func TestSchemaInstanceIsBoundedUnderRefFanOut(t *testing.T) {
	out := SchemaInstance(fanOutSchema(4, 10))
	if !json.Valid(out) {
		t.Fatalf("not JSON: %.200s", out)
	}
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	if values := countValues(v); values > MaxInstanceValues || len(out) > 32*MaxInstanceValues {
		t.Errorf("instance of %d bytes, %d values; want at most %d values", len(out), values, MaxInstanceValues)
	}
	t.Logf("fan-out 4×10: %d bytes", len(out))
	small := fanOutSchema(3, 4) // 81 strings
	out = SchemaInstance(small)
	if err := valid(t, small, out); err != nil {
		t.Errorf("instance %s of the small fan-out: %v", out, err)
	}
	if n := strings.Count(string(out), `"text"`); n != 81 {
		t.Errorf("%d strings, want 81", n)
	}
}

// A definition that refers to itself is cut where it recurs: an empty
// array, an optional property left out; the answer matches the schema.
func TestSchemaInstanceCutsRecursion(t *testing.T) {
	schema := json.RawMessage(`{"$ref":"#/$defs/node","$defs":{"node":{"type":"object","additionalProperties":false,
		"required":["name","children"],
		"properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}},"parent":{"$ref":"#/$defs/node"}}}}}`)
	out := SchemaInstance(schema)
	if string(out) != `{"children":[],"name":"text"}` {
		t.Errorf("instance %s", out)
	}
	if err := valid(t, schema, out); err != nil {
		t.Errorf("instance %s: %v", out, err)
	}
}

// countValues counts v's values: itself and, for an object or an array,
// those of its members.
func countValues(v any) int {
	n := 1
	switch v := v.(type) {
	case map[string]any:
		for _, m := range v {
			n += countValues(m)
		}
	case []any:
		for _, m := range v {
			n += countValues(m)
		}
	}
	return n
}
