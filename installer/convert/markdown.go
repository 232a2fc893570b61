package convert

import (
	"fmt"
	"strings"
)

// Markdown renders the table for README.md: the official key, ours beside it, and what
// happens to a value.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| official chart 2.x | ours | what happens |\n|---|---|---|\n")
	for _, r := range table {
		from, to := "`"+shown(r.from)+"`", "-"
		if len(r.to) > 0 {
			var ts []string
			for _, t := range r.to {
				ts = append(ts, "`"+shown(t)+"`")
			}
			to = strings.Join(ts, ", ")
		}
		var what []string
		switch r.action {
		case Mapped:
			if r.note != "" {
				what = append(what, shown(r.note))
			} else {
				what = append(what, "moved")
			}
		case Ignored:
			what = append(what, "ignored: "+shown(r.note))
		case Unmapped:
			what = append(what, "**not mapped**: "+shown(r.note))
		}
		if r.guard != "" {
			what = append(what, fmt.Sprintf("ignored while `%s` is off", shown(r.guard)))
		}
		if r.hasDefault {
			d := "ignored at the official default"
			if r.defaultWhy != "" {
				d += " (" + r.defaultWhy + ")"
			}
			if r.action == Ignored {
				d = "another value is **not mapped**"
			}
			what = append(what, d)
		}
		if len(r.comps) > 0 {
			what = append(what, "`<c>`: "+strings.Join(r.comps, ", "))
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", from, to, escape(strings.Join(what, "; ")))
	}
	return b.String()
}

func shown(s string) string { return strings.ReplaceAll(s, comp, "<c>") }

// escape keeps a cell in its column.
func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
