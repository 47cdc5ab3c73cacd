package console

import (
	"fmt"
	"html"
	"strings"
	"time"
)

// Pages are written by Go functions (views.go) rather than html/template:
// executing a text/template looks methods up by name through reflection,
// which makes the linker keep every exported method of every type in the
// binary (tens of megabytes of SDK code; docs/benchmarks.md, "Binary size
// and first build").
//
// The rule that keeps them safe: markup is only ever a constant of this
// package (the format strings of [hw.f] and the strings of [hw.raw]); every
// value, whatever its type, is escaped for HTML text and quoted attribute
// values, unless it is of type [markup]. Attribute values are always
// written in double quotes, URLs in attributes are constants or built with
// url.PathEscape (a query's value with url.QueryEscape), and pages have no inline script or style (the content
// security policy forbids both).

// markup is HTML written as it is: what [barChart] built, escaping every
// value it holds.
type markup string

// hw builds a page.
type hw struct{ strings.Builder }

// raw writes s, a constant of this package, as it is.
func (b *hw) raw(s string) { b.WriteString(s) }

// f writes format, a constant of this package, with every argument
// escaped (see above), so each verb in format must be %v (any value is a string by then).
func (b *hw) f(format string, args ...any) {
	for i, a := range args {
		if m, ok := a.(markup); ok {
			args[i] = string(m)
			continue
		}
		args[i] = html.EscapeString(fmt.Sprint(a))
	}
	fmt.Fprintf(b, format, args...)
}

// text writes v escaped.
func (b *hw) text(v any) { b.f("%v", v) }

// when formats a time for a page.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// under turns a status word into words ("not_checked" is "not checked").
func under(s string) string { return strings.ReplaceAll(s, "_", " ") }

// ms is a duration in whole milliseconds.
func ms(d time.Duration) int64 { return d.Milliseconds() }

// attrIf is attr when cond holds, else nothing.
func attrIf(cond bool, attr string) markup {
	if cond {
		return markup(attr)
	}
	return ""
}

// either is a when cond holds, else b.
func either(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}

// orAny is s, or "any" when s is empty.
func orAny(s string) string { return either(s == "", "any", s) }
