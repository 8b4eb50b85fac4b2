package metrics

import (
	"fmt"
	"strconv"
	"strings"
)

type described struct {
	name, typ, help string
	labels          []string
}

// parseDesc reads the name, help and variable labels out of Desc.String()
// (client_golang has no accessor for them).
func parseDesc(s string) (described, error) {
	var m described
	rest, ok := strings.CutPrefix(s, "Desc{fqName: ")
	if !ok {
		return m, fmt.Errorf("unexpected desc %q", s)
	}
	q, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return m, fmt.Errorf("desc %q: %w", s, err)
	}
	m.name, _ = strconv.Unquote(q)
	rest, ok = strings.CutPrefix(rest[len(q):], ", help: ")
	if !ok {
		return m, fmt.Errorf("unexpected desc %q", s)
	}
	if q, err = strconv.QuotedPrefix(rest); err != nil {
		return m, fmt.Errorf("desc %q: %w", s, err)
	}
	m.help, _ = strconv.Unquote(q)
	i := strings.LastIndex(rest, "variableLabels: {")
	if i < 0 {
		return m, fmt.Errorf("unexpected desc %q", s)
	}
	vl := strings.TrimSuffix(strings.TrimSuffix(rest[i+len("variableLabels: {"):], "}"), "}")
	if vl != "" {
		m.labels = strings.Split(vl, ",")
	}
	return m, nil
}
