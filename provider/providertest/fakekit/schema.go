package fakekit

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// SchemaInstance returns a JSON value that matches schema, the way a
// provider holding its model to a response schema answers: every object
// property (required or not) with a value of its type, the first of an
// enum or const, one item per array. It understands type (a string or a
// list, the first non-null one used), properties, items, enum, const,
// anyOf/oneOf (the first) and local $ref into $defs or definitions.
func SchemaInstance(schema json.RawMessage) json.RawMessage {
	var root map[string]any
	if json.Unmarshal(schema, &root) != nil {
		return json.RawMessage(`{}`)
	}
	b, _ := json.Marshal(instance(root, root, 0))
	return b
}

func instance(s, root map[string]any, depth int) any {
	if depth > 16 {
		return nil
	}
	if ref, ok := s["$ref"].(string); ok {
		for _, prefix := range []string{"#/$defs/", "#/definitions/"} {
			if len(ref) > len(prefix) && ref[:len(prefix)] == prefix {
				if defs, ok := root[prefix[2:len(prefix)-1]].(map[string]any); ok {
					if d, ok := defs[ref[len(prefix):]].(map[string]any); ok {
						return instance(d, root, depth+1)
					}
				}
			}
		}
		return nil
	}
	if v, ok := s["const"]; ok {
		return v
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			if a, ok := alts[0].(map[string]any); ok {
				return instance(a, root, depth+1)
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
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		for name, p := range props {
			if p, ok := p.(map[string]any); ok {
				out[name] = instance(p, root, depth+1)
			}
		}
		return out
	case "array":
		if it, ok := s["items"].(map[string]any); ok {
			return []any{instance(it, root, depth+1)}
		}
		return []any{}
	case "string":
		return "text"
	case "integer":
		return 1
	case "number":
		return 1.5
	case "boolean":
		return true
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
