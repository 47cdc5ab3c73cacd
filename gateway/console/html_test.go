package console

import (
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

func TestValuesAreEscapedAndMarkupIsNot(t *testing.T) {
	var b hw
	b.f(`<a title="%v" href="/x">%v</a> %v %v %v|`, `"><x-evil a='1'>&`, "<b>", 42, provider.Dollar/4, markup(`<i>chart</i>`))
	b.text(`<tag>`)
	want := `<a title="&#34;&gt;&lt;x-evil a=&#39;1&#39;&gt;&amp;" href="/x">&lt;b&gt;</a> 42 0.25 <i>chart</i>|&lt;tag&gt;`
	if got := b.String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestHelpers(t *testing.T) {
	if when(time.Time{}) != "-" || when(time.Date(2026, 5, 14, 12, 0, 0, 0, time.FixedZone("x", 3600))) != "2026-05-14 11:00:00Z" {
		t.Error("when")
	}
	if under("not_checked") != "not checked" || orAny("") != "any" || orAny("critic") != "critic" {
		t.Error("under / orAny")
	}
	var b hw
	toggleForm(&b, page{CSRF: "tok"}, "/console/control/task", "task", "T1", true, "Resume", "Pause")
	if got := b.String(); !strings.Contains(got, `<input type="hidden" name="csrf" value="tok"><input type="hidden" name="task" value="T1">`) ||
		!strings.Contains(got, `<input type="hidden" name="action" value="resume"><button type="submit">Resume</button>`) {
		t.Errorf("toggleForm = %s", got)
	}
}
