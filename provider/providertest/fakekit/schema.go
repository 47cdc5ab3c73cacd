package fakekit

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// MaxInstanceValues bounds the values (objects, arrays and scalars)
// [SchemaInstance] writes, so that a schema whose $ref fan-out would make
// the instance grow exponentially (a definition with ten properties each
// referring to the next definition, sixteen deep) costs at most this much.
const MaxInstanceValues = 4096

// maxInstanceDepth bounds the nesting of an instance.
const maxInstanceDepth = 16

// SchemaInstance returns a JSON value that matches schema, the way a
// provider holding its model to a response schema answers: every object
// property (required or not) with a value of its type, the first of an
// enum or const, one item per array. It understands type (a string or a
// list, the first non-null one used), properties, required, items, enum,
// const, anyOf/oneOf (the first) and local $ref into $defs or definitions.
//
// Each definition is instantiated once and reused. A definition that
// refers to itself (directly or not) is cut where it recurs: an optional
// property is left out, an array is empty, a required property is null.
// Past MaxInstanceValues values, or maxInstanceDepth levels, the same cuts
// apply, so the answer stays small but may no longer match a schema whose
// every instance is that large (real providers refuse such schemas).
func SchemaInstance(schema json.RawMessage) json.RawMessage {
	var root map[string]any
	if json.Unmarshal(schema, &root) != nil {
		return json.RawMessage(`{}`)
	}
	in := &instancer{root: root, memo: map[string]sized{}, active: map[string]bool{}, left: MaxInstanceValues}
	v, _, _ := in.instance(root, 0)
	b, _ := json.Marshal(v)
	return b
}

// sized is an instance and how many values it holds.
type sized struct {
	v any
	n int
}

type instancer struct {
	root   map[string]any
	memo   map[string]sized // instances of definitions, by $ref
	active map[string]bool  // definitions being instantiated
	left   int              // values still allowed
}

// instance returns an instance of s, how many values it holds, and false
// when it was cut (recursion, depth or size) before taking any of the
// budget: the caller leaves an optional property out, empties an array and
// writes null for a required property (whose slot an object reserves).
func (in *instancer) instance(s map[string]any, depth int) (any, int, bool) {
	if depth > maxInstanceDepth || in.left <= 0 {
		return nil, 0, false
	}
	if ref, ok := s["$ref"].(string); ok {
		return in.ref(ref, depth)
	}
	if v, ok := s["const"]; ok {
		return in.leaf(v)
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return in.leaf(e[0])
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			if a, ok := alts[0].(map[string]any); ok {
				return in.instance(a, depth+1)
			}
		}
	}
	typ, _ := s["type"].(string)
	if list, ok := s["type"].([]any); ok {
		for _, t := range list {
			if t, ok := t.(string); ok && t != "null" {
				typ = t
				break
			}
		}
	}
	switch typ {
	case "object", "":
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		var names, required []string
		for _, name := range slices.Sorted(maps.Keys(props)) {
			if _, ok := props[name].(map[string]any); ok {
				names = append(names, name)
				if slices.Contains(req, any(name)) {
					required = append(required, name)
				}
			}
		}
		// The object and a null for each required property fit, or
		// the object is cut.
		if 1+len(required) > in.left {
			return nil, 0, false
		}
		in.left -= 1 + len(required)
		out, n := map[string]any{}, 1
		for _, name := range names {
			isReq := slices.Contains(required, name)
			if isReq {
				in.left++ // its reserved null, for its value
			}
			v, m, ok := in.instance(props[name].(map[string]any), depth+1)
			if !ok {
				if !isReq {
					continue
				}
				in.left--
				v, m = nil, 1
			}
			out[name] = v
			n += m
		}
		return out, n, true
	case "array":
		in.left--
		if it, ok := s["items"].(map[string]any); ok {
			if v, m, ok := in.instance(it, depth+1); ok {
				return []any{v}, 1 + m, true
			}
		}
		return []any{}, 1, true
	case "string":
		return in.leaf("text")
	case "integer":
		return in.leaf(1)
	case "number":
		return in.leaf(1.5)
	case "boolean":
		return in.leaf(true)
	}
	return in.leaf(nil)
}

func (in *instancer) leaf(v any) (any, int, bool) {
	in.left--
	return v, 1, true
}

// ref instantiates the definition ref names, once: a second use reuses the
// first instance while the budget allows it.
func (in *instancer) ref(ref string, depth int) (any, int, bool) {
	if m, ok := in.memo[ref]; ok {
		if m.n > in.left {
			return nil, 0, false
		}
		in.left -= m.n
		return m.v, m.n, true
	}
	if in.active[ref] {
		return nil, 0, false
	}
	d := in.definition(ref)
	if d == nil {
		return nil, 0, false
	}
	in.active[ref] = true
	v, n, ok := in.instance(d, depth+1)
	delete(in.active, ref)
	if ok {
		in.memo[ref] = sized{v, n}
	}
	return v, n, ok
}

// definition returns the schema a local $ref names in $defs or
// definitions; nil when there is none.
func (in *instancer) definition(ref string) map[string]any {
	for _, prefix := range []string{"#/$defs/", "#/definitions/"} {
		if len(ref) > len(prefix) && ref[:len(prefix)] == prefix {
			if defs, ok := in.root[prefix[2:len(prefix)-1]].(map[string]any); ok {
				if d, ok := defs[ref[len(prefix):]].(map[string]any); ok {
					return d
				}
			}
		}
	}
	return nil
}

// ClosedSchemaProblem returns where schema breaks the rules of a strictly
// enforced response schema (OpenAI's strict mode, Anthropic's JSON
// outputs): the root must be an object schema, every object must set
// additionalProperties to false and, when allRequired, list every property
// in required. "" means it keeps them; otherwise the answer is "<path>: <what>".
func ClosedSchemaProblem(schema json.RawMessage, allRequired bool) string {
	var root map[string]any
	if json.Unmarshal(schema, &root) != nil || root == nil {
		return "(root): the schema must be a JSON object"
	}
	if t, _ := root["type"].(string); t != "object" {
		return "(root): the schema's type must be \"object\""
	}
	return closed(root, "(root)", allRequired)
}

func closed(s map[string]any, path string, allRequired bool) string {
	if t, _ := s["type"].(string); t == "object" {
		if ap, ok := s["additionalProperties"].(bool); !ok || ap {
			return path + ": 'additionalProperties' is required to be supplied and to be false"
		}
		props, _ := s["properties"].(map[string]any)
		if allRequired {
			req, _ := s["required"].([]any)
			for _, name := range slices.Sorted(maps.Keys(props)) {
				if !slices.Contains(req, any(name)) {
					return fmt.Sprintf("%s: 'required' is required to be supplied and to be an array including every key in properties. Missing '%s'", path, name)
				}
			}
		}
		for _, name := range slices.Sorted(maps.Keys(props)) {
			if p, ok := props[name].(map[string]any); ok {
				if msg := closed(p, path+".properties."+name, allRequired); msg != "" {
					return msg
				}
			}
		}
	}
	if it, ok := s["items"].(map[string]any); ok {
		return closed(it, path+".items", allRequired)
	}
	for _, k := range []string{"$defs", "definitions"} {
		if defs, ok := s[k].(map[string]any); ok {
			for _, name := range slices.Sorted(maps.Keys(defs)) {
				if d, ok := defs[name].(map[string]any); ok {
					if msg := closed(d, path+"."+k+"."+name, allRequired); msg != "" {
						return msg
					}
				}
			}
		}
	}
	return ""
}
