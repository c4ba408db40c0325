package mailtemplates

import "strings"

// The plain-text alternative. It has to read well on its own (some people
// read only this part): headings underlined, lines wrapped at 76
// characters, every link on its own line in <angle brackets> so clients
// make it clickable and never wrap it. The footer follows the "-- "
// signature line, which many clients dim. It needs no escaping, so it is
// plain Go: text/template found every field by reflection.
func renderText(b *strings.Builder, v *view) {
	switch v.Layout {
	case layoutSingle:
		singleText(b, v)
	case layoutDigest:
		digestText(b, v)
	default:
		groupText(b, &v.Groups[0])
	}
	b.WriteString("\n-- \n")
	if v.SentTo != "" {
		b.WriteString(v.SentTo + "\n")
	}
	if v.ProductURL != "" {
		b.WriteString("<" + v.ProductURL + ">\n")
	}
	footerText(b, v.MuteLabel, v.MuteURL)
	footerText(b, v.ChooseLabel, v.SettingsURL)
	footerText(b, v.UnsubscribeLabel, v.UnsubscribeURL)
}

func footerText(b *strings.Builder, label, url string) {
	if url != "" {
		b.WriteString("\n" + label + ":\n<" + url + ">\n")
	}
}

// heading writes s wrapped and underlined with char.
func heading(b *strings.Builder, s, char string) {
	b.WriteString(wrap(s, "", ""))
	b.WriteByte('\n')
	b.WriteString(rule(s, char))
	b.WriteByte('\n')
}

func singleText(b *strings.Builder, v *view) {
	if v.Context != "" {
		b.WriteString(wrap(v.Context, "", "") + "\n\n")
	}
	if v.Body != "" {
		heading(b, v.Title, "=")
		b.WriteString(wrap(v.Body, "", "") + "\n")
	} else {
		heading(b, v.Item.Text, "=")
	}
	if v.Item.When != "" {
		b.WriteString(v.Item.When + "\n")
	}
	if v.Item.URL != "" {
		b.WriteString("\n" + v.Item.Action + ": <" + v.Item.URL + ">\n")
	}
}

func digestText(b *strings.Builder, v *view) {
	heading(b, v.Title, "=")
	if v.Summary != "" {
		b.WriteString(wrap(v.Summary, "", "") + "\n")
	}
	for i := range v.Groups {
		g := &v.Groups[i]
		b.WriteByte('\n')
		if g.Label != "" {
			b.WriteString("[" + g.Label + "]\n")
		}
		groupText(b, g)
	}
	if v.Rest != "" {
		b.WriteString("\n" + wrap(v.Rest, "", "") + "\n")
	}
}

// groupText is a group: heading, true total, items, "and N more".
func groupText(b *strings.Builder, g *groupView) {
	heading(b, g.Heading, "-")
	if g.Note != "" {
		b.WriteString("(" + g.Note + ")\n")
	}
	b.WriteByte('\n')
	for i := range g.Items {
		it := &g.Items[i]
		b.WriteString(wrap(it.Text, "* ", "  ") + "\n")
		if it.When != "" {
			b.WriteString("  " + it.When + "\n")
		}
		if it.URL != "" {
			b.WriteString("  <" + it.URL + ">\n")
		}
		if it.MuteURL != "" {
			b.WriteString("  " + g.MuteLabel + ":\n  <" + it.MuteURL + ">\n")
		}
	}
	if g.More != "" {
		b.WriteString("\n" + g.More + "\n")
		if g.ViewURL != "" {
			b.WriteString(g.ViewAllLabel + ": <" + g.ViewURL + ">\n")
		}
	}
}
