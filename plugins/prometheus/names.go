package prometheus

import (
	"strings"
)

// name is the Prometheus name of Benthos metric n: sanitized and prefixed.
func (e *Exporter) name(n string) string {
	n = sanitize(n)
	if e.prefix != "" {
		n = e.prefix + "_" + n
	}
	return n
}

// sanitizeAll sanitizes every label name.
func sanitizeAll(in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = sanitize(s)
	}
	return out
}

// sanitize maps a Benthos metric or label name onto [a-zA-Z_:][a-zA-Z0-9_:]*.
func sanitize(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '_' || r == ':' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'):
			b.WriteRune(r)
		case r >= '0' && r <= '9':
			if i == 0 {
				b.WriteByte('_')
			}
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
