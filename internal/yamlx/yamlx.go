// Package yamlx decodes YAML strictly into Go structs and reports every
// problem with file:line:column and what to write instead.
//
// Unlike a plain yaml.Unmarshal it rejects unknown keys (suggesting the
// nearest valid one), duplicate keys, wrong node kinds (a list where a
// mapping belongs) and wrong scalar types (a word where a number belongs),
// and it keeps going so one run reports all problems.
//
// Struct fields are matched by their `yaml:"name"` tag; the option
// ",required" makes a missing key an error. A field of type [Pos] named Pos
// receives the position of the struct's mapping and of each of its keys.
// Scalars decode through encoding.TextUnmarshaler when the field type has
// it (its error becomes the message), and through [NodeUnmarshaler] when
// the type needs the node itself.
package yamlx

import (
	"bytes"
	"encoding"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/cortexbuild/cortexbuild/provider"
)

// maxErrors bounds how many problems one decode reports.
const maxErrors = 25

// Pos is a position in a YAML file. A Pos field in a struct also records
// where each of the struct's keys stood.
type Pos struct {
	File   string
	Line   int
	Column int
	keys   map[string]Pos
}

// String formats p as file:line:column.
func (p Pos) String() string {
	if p.Line == 0 {
		return p.File
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Column)
}

// Key returns the position of key's value in the mapping p belongs to, or
// p itself when the key was absent.
func (p Pos) Key(key string) Pos {
	if k, ok := p.keys[key]; ok {
		return k
	}
	return p
}

// Errorf returns a positioned error.
func (p Pos) Errorf(format string, args ...any) *Error {
	return &Error{Pos: p, Msg: fmt.Sprintf(format, args...)}
}

// NodeUnmarshaler is implemented by types that decode themselves from the
// raw node (for example to keep its position).
type NodeUnmarshaler interface {
	UnmarshalYAMLNode(file string, n *yaml.Node) error
}

// Error is one problem at one position.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// Errors is every problem found, in file order.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Err returns es as an error, or nil when empty; errors are sorted by
// position.
func (es Errors) Err() error {
	if len(es) == 0 {
		return nil
	}
	sort.SliceStable(es, func(i, j int) bool {
		if es[i].Pos.Line != es[j].Pos.Line {
			return es[i].Pos.Line < es[j].Pos.Line
		}
		return es[i].Pos.Column < es[j].Pos.Column
	})
	return es
}

// Decode parses data (named file in messages) into out, a pointer to a
// struct. It returns an [Errors] listing every problem. An empty document
// leaves out unchanged.
//
// The file is one YAML document: a leading "---" is accepted, but a second
// document (a later "---", or content after a "..." end marker) is an error
// at the marker's line, since a plain YAML decoder would silently ignore
// everything after it.
func Decode(file string, data []byte, out any) error {
	v := reflect.ValueOf(out)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		panic("yamlx: Decode needs a non-nil pointer")
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err == io.EOF {
		return nil // an empty file (or one of comments only) decodes to zero values
	} else if err != nil {
		return Errors{syntaxError(file, data, err)}
	}
	var next yaml.Node
	if err := dec.Decode(&next); err != io.EOF {
		return Errors{secondDocument(file, data, doc.Line, next.Line)}
	}
	d := &decoder{file: file}
	if len(doc.Content) == 0 {
		return nil
	}
	d.value(doc.Content[0], v.Elem(), "")
	return d.errs.Err()
}

// secondDocument reports the marker that ends the first document (which
// starts at line first). line is where the parser saw a second document
// start ("---"), 0 when it could not parse what follows; then the first
// marker after the first document is found in the text: document markers
// stand at column 0, so no scalar can hide one.
func secondDocument(file string, data []byte, first, line int) *Error {
	marker := "---"
	if line == 0 {
		for i, l := range strings.Split(string(data), "\n") {
			if i+1 <= first {
				continue
			}
			if m := docMarker(l); m != "" {
				line, marker = i+1, m
				break
			}
		}
	}
	if line == 0 {
		line = first
	}
	at := Pos{File: file, Line: line, Column: 1}
	name := filepath.Base(file)
	if marker == "..." {
		return at.Errorf("content after the \"...\" end-of-document marker is a second YAML document, which would be ignored; %s is one document: remove the \"...\" line", name)
	}
	return at.Errorf("a second YAML document starts here, which would be ignored; %s is one document: remove the \"---\" line (only a leading \"---\" before the first key is allowed)", name)
}

// docMarker returns "---" or "..." when line is a YAML document marker.
func docMarker(line string) string {
	line = strings.TrimRight(line, "\r")
	for _, m := range []string{"---", "..."} {
		if line == m || strings.HasPrefix(line, m+" ") || strings.HasPrefix(line, m+"\t") {
			return m
		}
	}
	return ""
}

var lineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func syntaxError(file string, data []byte, err error) *Error {
	msg := err.Error()
	line := 0
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	} else {
		// The parser names no line when the problem is on the first one,
		// or when the bytes themselves are bad (invalid UTF-8, a control
		// character): then the first bad character says where.
		msg = strings.TrimPrefix(msg, "yaml: ")
		line = 1
		if at := firstUnreadable(data); at >= 0 {
			line += bytes.Count(data[:at], []byte("\n"))
		}
	}
	hint := "check the indentation and that every key is followed by ': '"
	if strings.Contains(msg, "found character that cannot start any token") {
		hint = "YAML forbids tabs for indentation; indent with spaces"
	}
	return &Error{Pos: Pos{File: file, Line: line, Column: 1}, Msg: "invalid YAML: " + msg + " (" + hint + ")"}
}

// firstUnreadable is the offset of the first character YAML refuses
// (invalid UTF-8, or not printable), or -1.
func firstUnreadable(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		printable := r == '\t' || r == '\n' || r == '\r' || (r >= 0x20 && r <= 0x7e) || r == 0x85 ||
			(r >= 0xa0 && r <= 0xd7ff) || (r >= 0xe000 && r <= 0xfffd && (r != 0xfeff || i == 0)) || (r >= 0x10000 && r <= 0x10ffff)
		if (r == utf8.RuneError && n <= 1) || !printable {
			return i
		}
		i += n
	}
	return -1
}

type decoder struct {
	file string
	errs Errors
}

func (d *decoder) pos(n *yaml.Node) Pos { return Pos{File: d.file, Line: n.Line, Column: n.Column} }

func (d *decoder) fail(n *yaml.Node, format string, args ...any) {
	if len(d.errs) >= maxErrors {
		return
	}
	d.errs = append(d.errs, &Error{Pos: d.pos(n), Msg: fmt.Sprintf(format, args...)})
}

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	nodeUnmarshaler = reflect.TypeFor[NodeUnmarshaler]()
	durationType    = reflect.TypeFor[time.Duration]()
	posType         = reflect.TypeFor[Pos]()
)

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!int":
			return "the number " + n.Value
		case "!!float":
			return "the number " + n.Value
		case "!!bool":
			return "the boolean " + n.Value
		case "!!null":
			return "null"
		}
		return fmt.Sprintf("the text %q", n.Value)
	}
	return "an alias"
}

func where(path string) string {
	if path == "" {
		return "at the top level"
	}
	return "in " + path
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

func (d *decoder) value(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	t := v.Type()
	if reflect.PointerTo(t).Implements(nodeUnmarshaler) {
		if err := v.Addr().Interface().(NodeUnmarshaler).UnmarshalYAMLNode(d.file, n); err != nil {
			d.fail(n, "%s: %v", path, err)
		}
		return
	}
	if t.Kind() == reflect.Pointer {
		if isNull(n) {
			v.SetZero()
			return
		}
		p := reflect.New(t.Elem())
		d.value(n, p.Elem(), path)
		v.Set(p)
		return
	}
	if isNull(n) {
		v.SetZero()
		return
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		if n.Kind != yaml.ScalarNode {
			d.fail(n, "%s: expected a single value, got %s", path, kindName(n))
			return
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.Value)); err != nil {
			d.fail(n, "%s: %v", path, err)
		}
		return
	}
	if t == durationType {
		d.duration(n, v, path)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		d.structure(n, v, path)
	case reflect.Map:
		d.mapping(n, v, path)
	case reflect.Slice:
		d.list(n, v, path)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			d.fail(n, "%s: expected text, got %s (quote it if you meant text)", path, kindName(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			d.fail(n, "%s: expected true or false, got %s", path, kindName(n))
			return
		}
		v.SetBool(n.Value == "true" || n.Value == "True" || n.Value == "TRUE")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || err != nil {
			d.fail(n, "%s: expected a whole number, got %s", path, kindName(n))
			return
		}
		if v.OverflowInt(i) {
			d.fail(n, "%s: %d is out of range", path, i)
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		f, err := strconv.ParseFloat(n.Value, 64)
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") || err != nil || math.IsNaN(f) {
			d.fail(n, "%s: expected a number, got %s", path, kindName(n))
			return
		}
		v.SetFloat(f)
	case reflect.Interface:
		var x any
		if err := n.Decode(&x); err != nil {
			d.fail(n, "%s: %v", path, err)
			return
		}
		if x != nil {
			v.Set(reflect.ValueOf(x))
		}
	default:
		panic("yamlx: unsupported field type " + t.String())
	}
}

func (d *decoder) duration(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n, "%s: expected a duration such as 30s, 5m or 24h, got %s", path, kindName(n))
		return
	}
	dur, err := time.ParseDuration(n.Value)
	if err != nil {
		hint := ""
		if _, ierr := strconv.Atoi(n.Value); ierr == nil {
			hint = fmt.Sprintf(" (add a unit: %ss)", n.Value)
		}
		d.fail(n, "%s: invalid duration %q: write e.g. 30s, 5m or 24h%s", path, n.Value, hint)
		return
	}
	if dur < 0 {
		d.fail(n, "%s: duration must not be negative, got %s", path, n.Value)
		return
	}
	v.SetInt(int64(dur))
}

// field describes one decodable struct field.
type field struct {
	name     string
	index    []int
	required bool
}

// Field is one YAML key of a struct type, for schema generators.
type Field struct {
	Name     string
	Required bool
	Struct   reflect.StructField
}

// Fields returns the YAML keys of struct type t in declaration order,
// flattening fields tagged ",inline".
func Fields(t reflect.Type) []Field {
	var out []Field
	for _, f := range fieldsOf(t) {
		out = append(out, Field{Name: f.name, Required: f.required, Struct: t.FieldByIndex(f.index)})
	}
	return out
}

func fieldsOf(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if opts == "inline" && sf.Anonymous && sf.Type.Kind() == reflect.Struct {
			for _, inner := range fieldsOf(sf.Type) {
				inner.index = append([]int{i}, inner.index...)
				out = append(out, inner)
			}
			continue
		}
		if tag == "-" || !sf.IsExported() || sf.Type == posType {
			continue
		}
		if name == "" {
			name = strings.ToLower(sf.Name)
		}
		out = append(out, field{name: name, index: []int{i}, required: strings.Contains(opts, "required")})
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (d *decoder) structure(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, "%s: expected a mapping of keys to values, got %s", orTop(path), kindName(n))
		// Validation of what did not decode still points at the value.
		setPos(v, d.pos(n))
		return
	}
	fields := fieldsOf(v.Type())
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	p := d.pos(n)
	p.keys = map[string]Pos{}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.fail(k, "%s: keys must be plain names", orTop(path))
			continue
		}
		if seen[k.Value] {
			d.fail(k, "duplicate key %q %s: each key may appear once", k.Value, where(path))
			continue
		}
		seen[k.Value] = true
		var f *field
		for j := range fields {
			if fields[j].name == k.Value {
				f = &fields[j]
				break
			}
		}
		if f == nil {
			hint := ""
			if c := provider.Closest(k.Value, names); c != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", c)
			}
			d.fail(k, "unknown key %q %s%s; valid keys: %s", k.Value, where(path), hint, strings.Join(names, ", "))
			continue
		}
		p.keys[k.Value] = d.pos(val)
		d.value(val, v.FieldByIndex(f.index), join(path, k.Value))
	}
	for _, f := range fields {
		if f.required && !seen[f.name] {
			d.fail(n, "missing required key %q %s", f.name, where(path))
		}
	}
	setPos(v, p)
}

// setPos sets the fields of type [Pos] of the struct v to p.
func setPos(v reflect.Value, p Pos) {
	for i := range v.NumField() {
		if v.Type().Field(i).Type == posType {
			v.Field(i).Set(reflect.ValueOf(p))
		}
	}
}

func orTop(path string) string {
	if path == "" {
		return "the file"
	}
	return path
}

func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, "%s: expected a mapping of names to values, got %s", orTop(path), kindName(n))
		return
	}
	t := v.Type()
	m := reflect.MakeMapWithSize(t, len(n.Content)/2)
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			d.fail(k, "duplicate key %q %s: each key may appear once", k.Value, where(path))
			continue
		}
		seen[k.Value] = true
		kv := reflect.New(t.Key()).Elem()
		before := len(d.errs)
		d.value(k, kv, path)
		if len(d.errs) > before {
			continue
		}
		ev := reflect.New(t.Elem()).Elem()
		d.value(val, ev, join(path, k.Value))
		m.SetMapIndex(kv, ev)
	}
	v.Set(m)
}

func (d *decoder) list(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, "%s: expected a list, got %s (write [a, b] or one '- item' per line)", orTop(path), kindName(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.value(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
	}
	v.Set(s)
}
