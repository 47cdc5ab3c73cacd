package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// fields decodes one JSON object key by key, so that every error names the
// field it is about (messages[2].content[0].text) and the keys nobody took
// can be reported as ignored.
type fields struct {
	path string
	m    map[string]json.RawMessage
	used map[string]bool
}

// object opens raw as a JSON object; path names it in errors ("" for the
// request body itself).
//
// The values are slices of raw, not copies: a body is decoded once, each
// byte copied only into the strings the call keeps. A value kept in the
// call as raw JSON (a tool's schema, a tool call's input) is copied with
// [keep], so that the call does not pin the whole body.
func object(path string, raw json.RawMessage) (*fields, error) {
	m, ok := splitObject(raw)
	if !ok {
		if err := json.Unmarshal(raw, &m); err != nil || m == nil {
			return nil, badField(path, "want an object, got %s", jsonKind(raw))
		}
	}
	return &fields{path: path, m: m, used: make(map[string]bool, len(m))}, nil
}

// keep copies a value of the body that the call keeps as raw JSON.
func keep(raw json.RawMessage) json.RawMessage { return bytes.Clone(raw) }

// at names key inside this object.
func (f *fields) at(key string) string {
	if f.path == "" {
		return key
	}
	return f.path + "." + key
}

// has reports whether key is present and not null.
func (f *fields) has(key string) bool {
	raw, ok := f.m[key]
	return ok && !isNull(raw)
}

// raw returns key's value (nil when absent or null) and marks it used.
func (f *fields) raw(key string) json.RawMessage {
	raw, ok := f.m[key]
	if !ok {
		return nil
	}
	f.used[key] = true
	if isNull(raw) {
		return nil
	}
	return raw
}

// take decodes key into dst when present and not null, and marks it used.
func (f *fields) take(key string, dst any) error {
	raw := f.raw(key)
	if raw == nil {
		return nil
	}
	return decodeInto(f.at(key), raw, dst)
}

// skip marks keys as used without decoding them.
func (f *fields) skip(keys ...string) {
	for _, k := range keys {
		if _, ok := f.m[k]; ok {
			f.used[k] = true
		}
	}
}

// present returns those of keys that are present and not null, marking
// them used.
func (f *fields) present(keys ...string) []string {
	var out []string
	for _, k := range keys {
		if _, ok := f.m[k]; !ok {
			continue
		}
		f.used[k] = true
		if f.has(k) {
			out = append(out, k)
		}
	}
	return out
}

// unknown returns the keys nobody took, sorted.
func (f *fields) unknown() []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(f.m)) {
		if !f.used[k] {
			out = append(out, k)
		}
	}
	return out
}

// decodeInto unmarshals raw into dst, naming path in the error.
func decodeInto(path string, raw json.RawMessage, dst any) error {
	err := json.Unmarshal(raw, dst)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		where := path
		if te.Field != "" {
			where = path + "." + te.Field
		}
		return badField(where, "want %s, got %s", typeWord(te.Type.String()), te.Value)
	}
	return badField(path, "%v", err)
}

// array opens raw as a JSON array.
// Like [object], the items are slices of raw.
func array(path string, raw json.RawMessage) ([]json.RawMessage, error) {
	items, ok := splitArray(raw)
	if !ok {
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, badField(path, "want an array, got %s", jsonKind(raw))
		}
	}
	return items, nil
}

// stringOrParts reads content that is either a string or an array of
// parts: it returns the string, or the parts.
func stringOrParts(path string, raw json.RawMessage) (string, []json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || isNull(raw) {
		return "", nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", nil, badField(path, "%v", err)
		}
		return s, nil, nil
	}
	if raw[0] != '[' {
		return "", nil, badField(path, "want a string or an array of content parts, got %s", jsonKind(raw))
	}
	parts, err := array(path, raw)
	return "", parts, err
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// jsonKind names the JSON type of raw for messages.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// typeWord turns a Go type into the JSON word a client understands.
func typeWord(goType string) string {
	switch {
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map["), strings.Contains(goType, "struct"):
		return "an object"
	}
	return "a value of type " + goType
}

// fieldError is a request that cannot be decoded or is not allowed; it
// becomes a 400 naming Param.
type fieldError struct {
	Param string
	Msg   string
}

func (e *fieldError) Error() string {
	if e.Param == "" {
		return e.Msg
	}
	return e.Param + ": " + e.Msg
}

func badField(param, format string, args ...any) error {
	return &fieldError{Param: param, Msg: fmt.Sprintf(format, args...)}
}

// parseBody opens the request body as a JSON object with a clear message
// when it is empty or not JSON.
func parseBody(body []byte) (*fields, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badField("", "the request body is empty; send a JSON object")
	}
	// One validating scan of the whole body, without allocating: every
	// value split out of it below is then known to be well formed.
	if !json.Valid(body) {
		var v any
		err := json.Unmarshal(body, &v)
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, badField("", "the request body is not valid JSON: %v (at byte %d)", err, se.Offset)
		}
		return nil, badField("", "the request body is not valid JSON: %v", err)
	}
	m, ok := splitObject(body)
	if !ok {
		return nil, badField("", "the request body must be a JSON object, got %s", jsonKind(body))
	}
	return &fields{m: m, used: make(map[string]bool, len(m))}, nil
}

// splitObject splits a JSON object into its members, each value a slice
// of raw (a repeated key keeps its last value, as encoding/json does). ok
// is false when raw is not an object or not well formed.
func splitObject(raw []byte) (m map[string]json.RawMessage, ok bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false
	}
	m = map[string]json.RawMessage{}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return m, skipSpace(raw, i+1) == len(raw)
	}
	for {
		if i >= len(raw) || raw[i] != '"' {
			return nil, false
		}
		end := skipValue(raw, i)
		if end < 0 {
			return nil, false
		}
		key, ok := jsonString(raw[i:end])
		if !ok {
			return nil, false
		}
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return nil, false
		}
		i = skipSpace(raw, i+1)
		end = skipValue(raw, i)
		if end < 0 {
			return nil, false
		}
		m[key] = raw[i:end:end]
		i = skipSpace(raw, end)
		if i >= len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case '}':
			return m, skipSpace(raw, i+1) == len(raw)
		default:
			return nil, false
		}
	}
}

// splitArray splits a JSON array into its items, each a slice of raw.
func splitArray(raw []byte) (items []json.RawMessage, ok bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, false
	}
	items = []json.RawMessage{}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return items, skipSpace(raw, i+1) == len(raw)
	}
	for {
		end := skipValue(raw, i)
		if end < 0 {
			return nil, false
		}
		items = append(items, raw[i:end:end])
		i = skipSpace(raw, end)
		if i >= len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case ']':
			return items, skipSpace(raw, i+1) == len(raw)
		default:
			return nil, false
		}
	}
}

// jsonString decodes a JSON string literal, without copying through
// encoding/json when it has no escapes.
func jsonString(lit []byte) (string, bool) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return "", false
	}
	if bytes.IndexByte(lit, '\\') < 0 && utf8.Valid(lit) {
		return string(lit[1 : len(lit)-1]), true
	}
	var s string
	if json.Unmarshal(lit, &s) != nil {
		return "", false
	}
	return s, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the JSON value starting at b[i], or -1
// when b ends first. It finds the value's extent only; the body was
// validated as a whole by [parseBody], and what is decoded from a value is
// checked again by encoding/json.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		for j := i + 1; j < len(b); j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return -1
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end := skipValue(b, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) && !strings.ContainsRune(",}] \t\r\n", rune(b[j])) {
		j++
	}
	if j == i {
		return -1
	}
	return j
}
