package console

import (
	"fmt"
	"html"
	"html/template"
	"strings"

	"github.com/cortexbuild/cortexbuild/provider"
)

// bar is one bar of a chart; Limit, when above zero, is drawn as a mark.
type bar struct {
	Label string
	Value provider.Money
	Limit provider.Money
}

// barChart draws bars as inline SVG, on the server: presentation
// attributes only (no style attribute, which the content security policy
// forbids), every label escaped.
func barChart(title string, bars []bar) template.HTML {
	const width, height, top, bottom, left = 640, 220, 24, 40, 8
	var peak provider.Money
	for _, b := range bars {
		peak = max(peak, b.Value, b.Limit)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg class="chart" role="img" aria-label="%s" viewBox="0 0 %d %d" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg">`,
		html.EscapeString(title), width, height, width, height)
	fmt.Fprintf(&sb, `<title>%s</title>`, html.EscapeString(title))
	fmt.Fprintf(&sb, `<text x="%d" y="16" font-size="12" fill="#333">%s</text>`, left, html.EscapeString(title))
	plot := float64(height - top - bottom)
	n := max(len(bars), 1)
	slot := float64(width-2*left) / float64(n)
	base := height - bottom
	fmt.Fprintf(&sb, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999" stroke-width="1"/>`, left, base, width-left, base)
	for i, b := range bars {
		x := float64(left) + float64(i)*slot
		h := 0.0
		if peak > 0 {
			h = plot * float64(b.Value) / float64(peak)
		}
		fmt.Fprintf(&sb, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#3b6ea5"><title>%s: $%s</title></rect>`,
			x+slot*0.15, float64(base)-h, slot*0.7, h, html.EscapeString(b.Label), b.Value.String())
		if b.Limit > 0 && peak > 0 {
			y := float64(base) - plot*float64(b.Limit)/float64(peak)
			fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#c0392b" stroke-width="2"><title>budget $%s</title></line>`,
				x+slot*0.05, y, x+slot*0.95, y, b.Limit.String())
		}
		label := b.Label
		if len(label) > 14 {
			label = label[:13] + "…"
		}
		fmt.Fprintf(&sb, `<text x="%.1f" y="%d" font-size="10" text-anchor="middle" fill="#333">%s</text>`, x+slot/2, base+14, html.EscapeString(label))
	}
	fmt.Fprintf(&sb, `<text x="%d" y="%d" font-size="10" fill="#666">max $%s</text>`, left, height-8, peak.String())
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String()) // every interpolated text above is escaped
}
