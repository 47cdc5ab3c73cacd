package config

import (
	"encoding/json"
	"reflect"
	"time"

	"github.com/cortexbuild/cortexbuild/internal/yamlx"
	"github.com/cortexbuild/cortexbuild/provider"
)

// SchemaID is the $id of the configuration's JSON Schema.
const SchemaID = "https://cortexbuild.dev/schema/llm-config.schema.json"

// Schema returns the JSON Schema (draft 2020-12) of llm-config.yaml,
// generated from the same Go types the loader decodes, so the two cannot
// disagree. Editors validate with it through a modeline:
//
//	# yaml-language-server: $schema=./llm-config.schema.json
func Schema() ([]byte, error) {
	s := schemaFor(reflect.TypeFor[File](), "")
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	s["$id"] = SchemaID
	s["title"] = "CortexBuild LLM configuration (.cortexbuild/llm-config.yaml)"
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func enumOf[T ~string](vals []T) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = string(v)
	}
	return out
}

var enums = map[string][]string{
	"locality.mode":             {LocalityConsent, LocalityLocalOnly},
	"cache.backend":             {CacheMemory, CacheRedis, CacheOff},
	"store.backend":             {StoreSQLite, StorePostgres},
	"observability.logs.level":  {LogDebug, LogInfo, LogWarn},
	"observability.logs.format": {LogText, LogJSON},
}

// patterns are the formats of the string keys that have one.
var patterns = map[string]string{
	"project": projectPattern,
}

func schemaFor(t reflect.Type, key string) map[string]any {
	switch t {
	case reflect.TypeFor[provider.Tier]():
		return map[string]any{"type": "string", "enum": enumOf(provider.Tiers)}
	case reflect.TypeFor[provider.Capability]():
		return map[string]any{"type": "string", "enum": enumOf(provider.Capabilities)}
	case reflect.TypeFor[provider.Money]():
		return map[string]any{"type": []string{"string", "number"}, "pattern": `^\$?[0-9]*(\.[0-9]{1,9})?$`, "description": "USD amount, exact to 9 decimals"}
	case reflect.TypeFor[time.Duration]():
		return map[string]any{"type": "string", "pattern": `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`}
	case reflect.TypeFor[Secret]():
		return map[string]any{"type": "string", "description": "${ENV_VAR} reference (recommended) or a literal value"}
	case reflect.TypeFor[AlertThreshold]():
		return map[string]any{"type": "integer", "minimum": 1, "maximum": 100}
	case reflect.TypeFor[OverBudget]():
		return map[string]any{"type": "string", "enum": []string{string(OverBudgetAbort), string(OverBudgetEscalate)}}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return schemaFor(t.Elem(), key)
	case reflect.String:
		if e, ok := enums[key]; ok {
			return map[string]any{"type": "string", "enum": e}
		}
		if p, ok := patterns[key]; ok {
			return map[string]any{"type": "string", "pattern": p}
		}
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int64:
		return map[string]any{"type": "integer", "minimum": 0}
	case reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": schemaFor(t.Elem(), key)}
	case reflect.Map:
		m := map[string]any{"type": "object", "additionalProperties": schemaFor(t.Elem(), key)}
		if t.Key() == reflect.TypeFor[provider.Tier]() {
			m["propertyNames"] = map[string]any{"enum": enumOf(provider.Tiers)}
		}
		return m
	case reflect.Struct:
		props := map[string]any{}
		var required []string
		for _, f := range yamlx.Fields(t) {
			sub := f.Name
			if key != "" {
				sub = key + "." + f.Name
			}
			p := schemaFor(f.Struct.Type, sub)
			if d := f.Struct.Tag.Get("desc"); d != "" {
				p["description"] = d
			}
			props[f.Name] = p
			if f.Required {
				required = append(required, f.Name)
			}
		}
		s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	}
	return map[string]any{}
}
