package console

import (
	"fmt"
	"html"
	"math"
	"strings"

	"github.com/cortexbuild/cortexbuild/provider"
)

// bar is one bar of a chart; Limit, when above zero, is drawn as a mark
// if it fits the scale (see [barChart]).
type bar struct {
	Label string
	Value provider.Money
	Limit provider.Money
}

// limitFit is how far above the largest bar a limit may be and still be
// drawn: the chart is scaled to the data, so that realistic spend against
// a big budget is a visible bar, and a limit higher than this is named in
// a note instead of squashing every bar.
const limitFit = 2

// minBar is the height, in pixels, of the smallest bar above zero, so that
// a little spend beside a lot is still seen.
const minBar = 2.0

// Chart geometry, in pixels.
const (
	chartWidth, chartHeight       = 640, 220
	chartTop, chartBottom, chartX = 24, 40, 8
	chartLabelWidth               = 44 // the room one axis label needs
)

// chartScale returns the value at the top of a chart and the limits that
// are too high to draw at that scale: the scale is the largest bar, raised
// to a limit when the limit is at most limitFit times the largest bar.
// With no spend at all, the largest limit sets the scale.
func chartScale(bars []bar) (top provider.Money, far []provider.Money) {
	var peak, lim provider.Money
	for _, b := range bars {
		peak = max(peak, b.Value)
	}
	top = peak
	seen := map[provider.Money]bool{}
	for _, b := range bars {
		switch {
		case b.Limit <= 0:
		case peak == 0 || b.Limit <= peak*limitFit:
			lim = max(lim, b.Limit)
		case !seen[b.Limit]:
			seen[b.Limit] = true
			far = append(far, b.Limit)
		}
	}
	return max(top, lim), far
}

// barHeight is the height of a bar of value v on a plot of height plot
// scaled to top.
func barHeight(v, top provider.Money, plot float64) float64 {
	if v <= 0 || top <= 0 {
		return 0
	}
	return max(plot*float64(v)/float64(top), minBar)
}

// barChart draws bars as inline SVG, on the server: presentation
// attributes only (no style attribute, which the content security policy
// forbids), every label escaped. Bars are scaled to the data; each bar's
// limit is drawn as a red mark when it fits ([chartScale]), and a note
// names the limits above the chart.
func barChart(title string, bars []bar) markup {
	top, far := chartScale(bars)
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg class="chart" role="img" aria-label="%s" viewBox="0 0 %d %d" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg">`,
		html.EscapeString(title), chartWidth, chartHeight, chartWidth, chartHeight)
	fmt.Fprintf(&sb, `<title>%s</title>`, html.EscapeString(title))
	fmt.Fprintf(&sb, `<text x="%d" y="16" font-size="12" fill="#333">%s</text>`, chartX, html.EscapeString(title))
	plot := float64(chartHeight - chartTop - chartBottom)
	n := max(len(bars), 1)
	slot := float64(chartWidth-2*chartX) / float64(n)
	// Label every step-th bar, counted from the last, when they do not
	// all fit.
	step := max(int(math.Ceil(chartLabelWidth/slot)), 1)
	base := chartHeight - chartBottom
	fmt.Fprintf(&sb, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999" stroke-width="1"/>`, chartX, base, chartWidth-chartX, base)
	for i, b := range bars {
		x := float64(chartX) + float64(i)*slot
		h := barHeight(b.Value, top, plot)
		fmt.Fprintf(&sb, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#3b6ea5"><title>%s: $%s</title></rect>`,
			x+slot*0.15, float64(base)-h, slot*0.7, h, html.EscapeString(b.Label), b.Value.String())
		if b.Limit > 0 && b.Limit <= top {
			y := float64(base) - plot*float64(b.Limit)/float64(top)
			fmt.Fprintf(&sb, `<line class="limit" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#c0392b" stroke-width="2"><title>budget $%s</title></line>`,
				x+slot*0.05, y, x+slot*0.95, y, b.Limit.String())
		}
		if (len(bars)-1-i)%step != 0 {
			continue
		}
		label := b.Label
		if len(label) > 14 {
			label = label[:13] + "…"
		}
		fmt.Fprintf(&sb, `<text x="%.1f" y="%d" font-size="10" text-anchor="middle" fill="#333">%s</text>`, x+slot/2, base+14, html.EscapeString(label))
	}
	note := "top $" + top.String()
	if len(far) > 0 {
		var names []string
		for _, l := range far {
			names = append(names, "$"+l.String())
		}
		note += "; budget " + strings.Join(names, ", ") + " is far above, not drawn"
	}
	fmt.Fprintf(&sb, `<text class="note" x="%d" y="%d" font-size="10" fill="#666">%s</text>`, chartX, chartHeight-8, html.EscapeString(note))
	sb.WriteString(`</svg>`)
	return markup(sb.String()) // every interpolated text above is escaped
}
