package yamlx

import (
	"errors"
	"strings"
	"testing"
	"time"
)

type rates struct {
	In  int `yaml:"in,required"`
	Out int `yaml:"out"`
}

type item struct {
	Pos   Pos    `yaml:"-"`
	Name  string `yaml:"name,required"`
	rates `yaml:",inline"`
	Wait  time.Duration `yaml:"wait"`
	Tags  []string      `yaml:"tags"`
	Opt   *bool         `yaml:"opt"`
	Ratio float64       `yaml:"ratio"`
}

type doc struct {
	Items map[string]*item `yaml:"items"`
	List  []item           `yaml:"list"`
}

func TestDecodeValidWithPositionsAndInline(t *testing.T) {
	src := "items:\n  a:\n    name: alpha\n    in: 1\n    out: 2\n    wait: 1m\n    tags: [x, y]\n    opt: true\n    ratio: 1.5\nlist:\n  - &base {name: b, in: 3}\n  - *base\n"
	var d doc
	if err := Decode("f.yaml", []byte(src), &d); err != nil {
		t.Fatal(err)
	}
	a := d.Items["a"]
	if a.Name != "alpha" || a.In != 1 || a.Out != 2 || a.Wait != time.Minute || len(a.Tags) != 2 || a.Opt == nil || !*a.Opt || a.Ratio != 1.5 {
		t.Errorf("decoded %+v", a)
	}
	if a.Pos.String() != "f.yaml:3:5" || a.Pos.Key("wait").String() != "f.yaml:6:11" || a.Pos.Key("absent").String() != "f.yaml:3:5" {
		t.Errorf("positions: %s %s", a.Pos, a.Pos.Key("wait"))
	}
	if len(d.List) != 2 || d.List[1].Name != "b" || d.List[1].In != 3 {
		t.Errorf("alias not followed: %+v", d.List)
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{"items:\n  a:\n    nam: x\n    in: 1\n", `f.yaml:3:5: unknown key "nam" in items.a (did you mean "name"?); valid keys: name, in, out, wait, tags, opt, ratio`},
		{"items:\n  a:\n    name: x\n", `f.yaml:3:5: missing required key "in" in items.a`},
		{"items:\n  a: {name: x, in: one}\n", `f.yaml:2:20: items.a.in: expected a whole number, got the text "one"`},
		{"items:\n  a: {name: 5, in: 1}\n", "items.a.name: expected text, got the number 5 (quote it if you meant text)"},
		{"items:\n  a: {name: x, in: 1, tags: x}\n", "items.a.tags: expected a list"},
		{"items:\n  a: {name: x, in: 1, wait: soon}\n", `invalid duration "soon"`},
		{"items:\n  a: {name: x, in: 1, wait: -1s}\n", "must not be negative"},
		{"items:\n  a: {name: x, in: 99999999999999999999}\n", "expected a whole number"},
		{"items: [1]\n", "items: expected a mapping of names to values, got a list"},
		{"items:\n  a: {name: x, in: 1}\n  a: {name: y, in: 2}\n", `f.yaml:3:3: duplicate key "a" in items`},
		{"items:\n  a: {name: x, in: 1, ratio: fast}\n", "expected a number"},
		{"list:\n  - {name: x, in: 1, opt: 1}\n", "expected true or false"},
	}
	for _, tt := range tests {
		var d doc
		err := Decode("f.yaml", []byte(tt.src), &d)
		var es Errors
		if !errors.As(err, &es) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q:\n got %v\nwant %s", tt.src, err, tt.want)
		}
	}
}

func TestErrorsAreCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString("items:\n")
	for i := range 40 {
		b.WriteString("  k" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + ": {bad: 1}\n")
	}
	var d doc
	err := Decode("f.yaml", []byte(b.String()), &d)
	var es Errors
	if !errors.As(err, &es) || len(es) != maxErrors {
		t.Errorf("got %d errors, want the cap %d", len(es), maxErrors)
	}
}

func TestDecodeRefusesASecondDocument(t *testing.T) {
	tests := []struct{ src, want string }{
		{"list:\n  - {name: a, in: 1}\n---\nitems:\n  b: {name: b, in: 2}\n", `f.yaml:3:1: a second YAML document starts here, which would be ignored; f.yaml is one document: remove the "---" line`},
		{"---\nlist: []\n---\n", `f.yaml:3:1: a second YAML document starts here`},
		{"---\n---\nlist: []\n", `f.yaml:2:1: a second YAML document starts here`},
		{"list: []\n--- # more\n# only a comment\n", `f.yaml:2:1: a second YAML document starts here`},
		{"list: []\n---\nitems: [\n", `f.yaml:2:1: a second YAML document starts here`},
		{"list: []\n...\nitems: {}\n", `f.yaml:2:1: content after the "..." end-of-document marker is a second YAML document, which would be ignored; f.yaml is one document: remove the "..." line`},
		{"list: []\n...\n---\nitems: {}\n", `f.yaml:3:1: a second YAML document starts here`},
	}
	for _, tt := range tests {
		var d doc
		err := Decode("dir/f.yaml", []byte(tt.src), &d)
		if err == nil || !strings.Contains(err.Error(), strings.Replace(tt.want, "f.yaml:", "dir/f.yaml:", 1)) {
			t.Errorf("%q:\n got %v\nwant %s", tt.src, err, tt.want)
		}
	}
}

func TestDecodeAcceptsOneDocumentWithMarkers(t *testing.T) {
	for _, src := range []string{
		"---\nlist:\n  - {name: a, in: 1}\n",
		"# header\n---\nlist:\n  - {name: a, in: 1}\n",
		"%YAML 1.1\n---\nlist:\n  - {name: a, in: 1}\n",
		"list:\n  - {name: a, in: 1}\n...\n",
		"list:\n  - {name: a, in: 1}\n...\n# trailing comment\n",
		"list:\n  - name: a\n    in: 1\n    tags:\n      - \"---\"\n",
	} {
		var d doc
		if err := Decode("f.yaml", []byte(src), &d); err != nil || len(d.List) != 1 || d.List[0].Name != "a" {
			t.Errorf("%q: err %v, decoded %+v", src, err, d)
		}
	}
	var d doc
	if err := Decode("f.yaml", []byte("# only a comment\n"), &d); err != nil {
		t.Errorf("comment-only file: %v", err)
	}
}
